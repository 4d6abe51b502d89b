//! Compiled globs, shared by every session that uses the same patterns.
//!
//! A glob compiles to a regex of several kilobytes, and every session used
//! to compile its own tool policy's (a profile expands to a dozen globs) and
//! its shell environment's: about 230 KB a session, most of the heap that
//! 100 concurrent sessions held. The patterns come from the configuration,
//! so the tables stay small; past [`MAX_ENTRIES`] a table stops growing
//! and further patterns are compiled for their caller alone.

use std::collections::BTreeMap;
use std::sync::Arc;

use globset::{GlobBuilder, GlobMatcher, GlobSet};
use parking_lot::Mutex;

/// How many distinct patterns (or pattern lists) a table keeps.
pub const MAX_ENTRIES: usize = 512;

static MATCHERS: Mutex<BTreeMap<String, Arc<GlobMatcher>>> = Mutex::new(BTreeMap::new());
static SETS: Mutex<BTreeMap<Vec<String>, Arc<GlobSet>>> = Mutex::new(BTreeMap::new());

/// `pattern` as a case-insensitive glob in which `*` also crosses `/`
/// (tool names such as `mcp__server__tool` have no path separators to
/// respect). A pattern that does not parse is not kept. Shared, not
/// cloned: a cloned matcher starts its own pool of match caches.
pub fn matcher(pattern: &str) -> Result<Arc<GlobMatcher>, globset::Error> {
    if let Some(found) = MATCHERS.lock().get(pattern) {
        return Ok(found.clone());
    }
    let compiled = Arc::new(
        GlobBuilder::new(pattern)
            .case_insensitive(true)
            .literal_separator(false)
            .build()?
            .compile_matcher(),
    );
    let mut table = MATCHERS.lock();
    if table.len() < MAX_ENTRIES {
        table.insert(pattern.to_string(), compiled.clone());
    }
    Ok(compiled)
}

/// The set `make` builds from `patterns`, built once per distinct list.
pub fn set(patterns: &[String], make: impl FnOnce(&[String]) -> GlobSet) -> Arc<GlobSet> {
    if let Some(found) = SETS.lock().get(patterns) {
        return found.clone();
    }
    let built = Arc::new(make(patterns));
    let mut table = SETS.lock();
    if table.len() < MAX_ENTRIES {
        table.insert(patterns.to_vec(), built.clone());
    }
    built
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pattern_compiles_once_and_matches_as_it_did_alone() {
        let first = matcher("MCP__*").unwrap();
        let again = matcher("MCP__*").unwrap();
        assert!(Arc::ptr_eq(&first, &again));
        assert!(first.is_match("mcp__github__issues") && again.is_match("mcp__a/b"));
        assert!(!first.is_match("bash"));
        assert!(MATCHERS.lock().contains_key("MCP__*"));
        assert!(matcher("[").is_err());
        assert!(!MATCHERS.lock().contains_key("["));
    }

    #[test]
    fn a_list_builds_its_set_once_and_the_table_stops_growing_at_its_bound() {
        let list = vec!["ONE_*".to_string()];
        let mut built = 0;
        let make = |patterns: &[String]| {
            let mut builder = globset::GlobSetBuilder::new();
            for p in patterns {
                builder.add(globset::Glob::new(p).unwrap());
            }
            builder.build().unwrap()
        };
        let a = set(&list, |p| {
            built += 1;
            make(p)
        });
        let b = set(&list, |p| {
            built += 1;
            make(p)
        });
        assert_eq!(built, 1);
        assert!(Arc::ptr_eq(&a, &b) && a.is_match("ONE_X"));
        for i in 0..MAX_ENTRIES + 10 {
            set(&[format!("bound_{i}")], make);
        }
        assert!(SETS.lock().len() <= MAX_ENTRIES);
    }
}
