//! What a single run changes on top of config.toml: `-c key=value`
//! overrides and `--allowed-tools` / `--disallowed-tools`. Both are checked
//! before anything runs, so a typo is a usage error that names it rather
//! than a setting silently ignored.

use crate::config::Config;

/// Applies `-c key=value` overrides (dotted keys, as in config.toml:
/// `max_turns=3`, `compaction.enabled=false`). A value is read as a TOML
/// value when it is one (`3`, `true`, `["a"]`, `"quoted"`), else as a
/// string, as `codex -c` does; the result must still be a valid config.
pub fn apply(config: &mut Config, overrides: &[String]) -> Result<(), String> {
    if overrides.is_empty() {
        return Ok(());
    }
    let mut root = toml::Value::try_from(&*config)
        .map_err(|e| format!("cannot apply -c overrides to this config: {e}"))?;
    for arg in overrides {
        let Some((key, raw)) = arg.split_once('=') else {
            return Err(format!(
                "-c {arg}: expected key=value, with a key of config.toml (e.g. -c max_turns=5)"
            ));
        };
        let path: Vec<&str> = key.trim().split('.').map(str::trim).collect();
        if path.iter().any(|part| part.is_empty()) {
            return Err(format!("-c {arg}: `{key}` is not a config key"));
        }
        let value = parse_value(raw.trim());
        set(&mut root, &path, value).map_err(|e| format!("-c {arg}: {e}"))?;
        // Checked one by one, so that the error names the override at fault.
        let checked: Config = root
            .clone()
            .try_into()
            .map_err(|e: toml::de::Error| format!("-c {arg}: {}", e.message().trim()))?;
        drop(checked);
    }
    let mut updated: Config = root
        .try_into()
        .map_err(|e: toml::de::Error| format!("-c: {}", e.message().trim()))?;
    // Fields that never come from a file stay as the project gave them.
    updated.project_tools = config.project_tools.take();
    updated.project_mcp = std::mem::take(&mut config.project_mcp);
    *config = updated;
    Ok(())
}

fn parse_value(raw: &str) -> toml::Value {
    toml::from_str::<toml::Table>(&format!("value = {raw}"))
        .ok()
        .and_then(|mut table| table.remove("value"))
        .unwrap_or_else(|| toml::Value::String(raw.to_string()))
}

fn set(root: &mut toml::Value, path: &[&str], value: toml::Value) -> Result<(), String> {
    let Some((last, parents)) = path.split_last() else {
        return Err("empty key".to_string());
    };
    let mut table = root
        .as_table_mut()
        .ok_or_else(|| "the config is not a table".to_string())?;
    for (depth, part) in parents.iter().enumerate() {
        let entry = table
            .entry(part.to_string())
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        table = entry.as_table_mut().ok_or_else(|| {
            format!(
                "`{}` is a value, not a table of keys",
                parents[..=depth].join(".")
            )
        })?;
    }
    table.insert(last.to_string(), value);
    Ok(())
}

/// Checks `--allowed-tools` / `--disallowed-tools` entries: a `group:`, a
/// glob, an MCP tool (`mcp__…`), or the name of a tool pincer has. Anything
/// else is most likely a typo that would silently allow nothing (or deny
/// nothing).
pub fn check_tool_names(flag: &str, entries: &[String], known: &[&str]) -> Result<(), String> {
    for entry in entries {
        let name = entry.trim();
        let lower = name.to_ascii_lowercase();
        let pattern = lower.starts_with("group:")
            || lower.starts_with("mcp__")
            || name.contains(['*', '?', '[', '{']);
        if !pattern && !known.iter().any(|k| k.eq_ignore_ascii_case(name)) {
            return Err(format!(
                "{flag}: no tool named `{name}`; tools are {}, or a group such as group:fs, group:runtime, group:search",
                known.join(", ")
            ));
        }
    }
    Ok(())
}

/// Splits repeated, comma- or space-separated lists into entries.
pub fn tool_list(values: &[String]) -> Vec<String> {
    values
        .iter()
        .flat_map(|v| v.split([',', ' ']))
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(str::to_string)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn overrides_set_config_keys_with_typed_values() {
        let mut config = Config {
            max_retries: Some(4),
            ..Config::default()
        };
        apply(
            &mut config,
            &[
                "max_turns=3".to_string(),
                "model=openai/gpt-5".to_string(),
                "compaction.enabled=false".to_string(),
                "tools.deny=[\"bash\"]".to_string(),
            ],
        )
        .unwrap();
        assert_eq!(config.max_turns, Some(3));
        assert_eq!(config.max_retries, Some(4));
        assert_eq!(config.model.as_deref(), Some("openai/gpt-5"));
        assert_eq!(config.tools.deny, vec!["bash".to_string()]);
    }

    #[test]
    fn a_bad_key_or_value_is_named() {
        let mut config = Config::default();
        let error = apply(&mut config, &["max_turnz=3".to_string()]).unwrap_err();
        assert!(
            error.starts_with("-c max_turnz=3: unknown field `max_turnz`"),
            "{error}"
        );
        let error = apply(&mut config, &["max_turns=many".to_string()]).unwrap_err();
        assert!(
            error.starts_with("-c max_turns=many: invalid type"),
            "{error}"
        );
        let error = apply(&mut config, &["max_turns".to_string()]).unwrap_err();
        assert!(error.contains("expected key=value"), "{error}");
        let error = apply(&mut config, &["model.x=1".to_string()]).unwrap_err();
        assert!(error.starts_with("-c model.x=1:"), "{error}");
        assert_eq!(config, Config::default());
    }

    #[test]
    fn tool_names_are_checked() {
        let known = ["read", "bash"];
        assert_eq!(
            check_tool_names(
                "--allowed-tools",
                &tool_list(&["read, group:fs mcp__x__y".into(), "b*".into()]),
                &known
            ),
            Ok(())
        );
        let error = check_tool_names("--disallowed-tools", &["bsh".into()], &known).unwrap_err();
        assert!(
            error.starts_with("--disallowed-tools: no tool named `bsh`"),
            "{error}"
        );
    }
}
