//! Which models exist, where they live and what they cost.
//!
//! Built-in providers (Anthropic, OpenAI, and local OpenAI-compatible servers
//! such as Ollama) come with their conventional environment variables and
//! base URLs; custom providers and models come from the config file. A model
//! id is always `provider/model`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// A provider wire format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Hash)]
pub enum Api {
    #[serde(rename = "anthropic-messages")]
    AnthropicMessages,
    #[serde(rename = "openai-completions")]
    OpenaiCompletions,
    #[serde(rename = "openai-responses")]
    OpenaiResponses,
    #[serde(rename = "google-generative-ai")]
    GoogleGenerativeAi,
    #[serde(rename = "bedrock-converse-stream")]
    BedrockConverseStream,
}

impl Api {
    pub fn as_str(self) -> &'static str {
        match self {
            Api::AnthropicMessages => "anthropic-messages",
            Api::OpenaiCompletions => "openai-completions",
            Api::OpenaiResponses => "openai-responses",
            Api::GoogleGenerativeAi => "google-generative-ai",
            Api::BedrockConverseStream => "bedrock-converse-stream",
        }
    }
}

/// USD per million tokens.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Pricing {
    pub input: f64,
    pub output: f64,
    pub cache_read: f64,
    pub cache_write: f64,
}

/// Everything pincer needs to call one model.
#[derive(Clone, Debug, PartialEq)]
pub struct Model {
    /// The provider's name in pincer (`anthropic`, `openai`, `ollama`, …).
    pub provider: String,
    /// The provider's model id (`claude-sonnet-4-5`).
    pub id: String,
    pub name: String,
    pub api: Api,
    /// For Anthropic the host root (`https://api.anthropic.com`); for
    /// OpenAI-compatible APIs the root including `/v1`.
    pub base_url: String,
    pub reasoning: bool,
    pub image_input: bool,
    pub context_window: u64,
    pub max_tokens: u64,
    pub pricing: Pricing,
    /// Extra HTTP headers the provider needs.
    pub headers: Vec<(String, String)>,
}

impl Pricing {
    /// USD per million tokens written to a one-hour cache: Anthropic
    /// charges twice the base input price for it (against 1.25× for the
    /// five-minute cache that `cache_write` prices).
    pub fn cache_write_1h(&self) -> f64 {
        self.input * 2.0
    }
}

impl Model {
    /// `provider/id`, the form users type.
    pub fn full_id(&self) -> String {
        format!("{}/{}", self.provider, self.id)
    }
}

/// A provider: where it lives, how it authenticates, which models it has.
#[derive(Clone, Debug, PartialEq)]
pub struct Provider {
    pub name: String,
    pub api: Api,
    pub base_url: String,
    /// Environment variable holding the API key, if the provider needs one.
    pub api_key_env: Option<String>,
    /// A key written in the config file (after profiles and the variable).
    pub api_key: Option<super::Secret>,
    /// Whether requests without a key are acceptable (local servers).
    pub key_optional: bool,
    pub headers: Vec<(String, String)>,
    pub models: Vec<Model>,
    pub runtime: RuntimeKind,
    pub claude_path: Option<String>,
    /// Models whose `runtime` differs from the provider's, by id.
    pub model_runtimes: BTreeMap<String, RuntimeKind>,
}

/// A model entry of a custom provider in the config file.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ModelConfig {
    pub id: String,
    pub name: Option<String>,
    pub reasoning: Option<bool>,
    pub image_input: Option<bool>,
    pub context_window: Option<u64>,
    pub max_tokens: Option<u64>,
    pub pricing: Option<Pricing>,
    /// Who runs this model's turns, over the provider's `runtime`.
    pub runtime: Option<RuntimeKind>,
}

/// A `[providers.<name>]` table of the config file. For a built-in provider
/// every field is optional and overrides the built-in value.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ProviderConfig {
    pub api: Option<Api>,
    pub base_url: Option<String>,
    pub api_key_env: Option<String>,
    /// A literal key; prefer `api_key_env` or `pincer login`, which keep
    /// keys out of config files.
    pub api_key: Option<super::Secret>,
    pub headers: BTreeMap<String, String>,
    pub models: Vec<ModelConfig>,
    /// Who runs the turns of this provider's Claude models: pincer's own
    /// loop (the default) or the user's Claude Code CLI.
    pub runtime: Option<RuntimeKind>,
    /// The Claude Code CLI to run (`claude`, found on `PATH`, by default).
    pub claude_path: Option<String>,
}

/// Who runs a turn: pincer's own loop, or the user's Claude Code CLI
/// (`claude -p`) with pincer's tools, policy and permissions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RuntimeKind {
    #[default]
    Native,
    ClaudeCode,
}

impl RuntimeKind {
    pub fn id(self) -> &'static str {
        match self {
            RuntimeKind::Native => "native",
            RuntimeKind::ClaudeCode => "claude-code",
        }
    }
}

/// The providers that stand for a Claude subscription: their turns always
/// run through the user's own Claude Code CLI, logged in by the user.
pub const SUBSCRIPTION_PROVIDERS: [&str; 2] = ["claude-pro", "claude-max"];

/// The CLI run when a provider names none.
pub const DEFAULT_CLAUDE_PATH: &str = "claude";

/// How a model's turns reach Claude Code.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClaudeCodeTarget {
    /// The CLI to run.
    pub path: String,
    /// The model pincer's own loop answers with when Claude Code cannot
    /// (`anthropic/<id>` for a subscription provider).
    pub native: String,
}

/// Defaults for models nobody described (a local model pulled yesterday).
const DEFAULT_CONTEXT_WINDOW: u64 = 128_000;
const DEFAULT_MAX_TOKENS: u64 = 16_384;

struct Builtin {
    id: &'static str,
    name: &'static str,
    reasoning: bool,
    image_input: bool,
    context_window: u64,
    max_tokens: u64,
    pricing: Pricing,
}

const fn price(input: f64, output: f64, cache_read: f64, cache_write: f64) -> Pricing {
    Pricing {
        input,
        output,
        cache_read,
        cache_write,
    }
}

// Prices in USD per million tokens, as the providers list them.
const ANTHROPIC_MODELS: &[Builtin] = &[
    Builtin {
        id: "claude-sonnet-4-5",
        name: "Claude Sonnet 4.5",
        reasoning: true,
        image_input: true,
        context_window: 200_000,
        max_tokens: 64_000,
        pricing: price(3.0, 15.0, 0.3, 3.75),
    },
    Builtin {
        id: "claude-opus-4-5",
        name: "Claude Opus 4.5",
        reasoning: true,
        image_input: true,
        context_window: 200_000,
        max_tokens: 64_000,
        pricing: price(5.0, 25.0, 0.5, 6.25),
    },
    Builtin {
        id: "claude-haiku-4-5",
        name: "Claude Haiku 4.5",
        reasoning: true,
        image_input: true,
        context_window: 200_000,
        max_tokens: 64_000,
        pricing: price(1.0, 5.0, 0.1, 1.25),
    },
    Builtin {
        id: "claude-opus-4-1",
        name: "Claude Opus 4.1",
        reasoning: true,
        image_input: true,
        context_window: 200_000,
        max_tokens: 32_000,
        pricing: price(15.0, 75.0, 1.5, 18.75),
    },
    Builtin {
        id: "claude-sonnet-4-0",
        name: "Claude Sonnet 4",
        reasoning: true,
        image_input: true,
        context_window: 200_000,
        max_tokens: 64_000,
        pricing: price(3.0, 15.0, 0.3, 3.75),
    },
];

/// Claude on Bedrock, by inference profile (the bare model ids are refused
/// for on-demand calls).
const BEDROCK_MODELS: &[Builtin] = &[
    Builtin {
        id: "global.anthropic.claude-sonnet-4-5-20250929-v1:0",
        name: "Claude Sonnet 4.5 (Bedrock)",
        reasoning: true,
        image_input: true,
        context_window: 200_000,
        max_tokens: 64_000,
        pricing: price(3.0, 15.0, 0.3, 3.75),
    },
    Builtin {
        id: "global.anthropic.claude-opus-4-5-20251101-v1:0",
        name: "Claude Opus 4.5 (Bedrock)",
        reasoning: true,
        image_input: true,
        context_window: 200_000,
        max_tokens: 64_000,
        pricing: price(5.0, 25.0, 0.5, 6.25),
    },
    Builtin {
        id: "global.anthropic.claude-haiku-4-5-20251001-v1:0",
        name: "Claude Haiku 4.5 (Bedrock)",
        reasoning: true,
        image_input: true,
        context_window: 200_000,
        max_tokens: 64_000,
        pricing: price(1.0, 5.0, 0.1, 1.25),
    },
    Builtin {
        id: "us.anthropic.claude-sonnet-4-20250514-v1:0",
        name: "Claude Sonnet 4 (Bedrock, US)",
        reasoning: true,
        image_input: true,
        context_window: 200_000,
        max_tokens: 64_000,
        pricing: price(3.0, 15.0, 0.3, 3.75),
    },
];

const GOOGLE_MODELS: &[Builtin] = &[
    Builtin {
        id: "gemini-2.5-pro",
        name: "Gemini 2.5 Pro",
        reasoning: true,
        image_input: true,
        context_window: 1_048_576,
        max_tokens: 65_536,
        pricing: price(1.25, 10.0, 0.125, 0.0),
    },
    Builtin {
        id: "gemini-2.5-flash",
        name: "Gemini 2.5 Flash",
        reasoning: true,
        image_input: true,
        context_window: 1_048_576,
        max_tokens: 65_536,
        pricing: price(0.30, 2.50, 0.03, 0.0),
    },
    Builtin {
        id: "gemini-2.5-flash-lite",
        name: "Gemini 2.5 Flash-Lite",
        reasoning: true,
        image_input: true,
        context_window: 1_048_576,
        max_tokens: 65_536,
        pricing: price(0.10, 0.40, 0.01, 0.0),
    },
    Builtin {
        id: "gemini-3-pro-preview",
        name: "Gemini 3 Pro (preview)",
        reasoning: true,
        image_input: true,
        context_window: 1_048_576,
        max_tokens: 65_536,
        pricing: price(2.0, 12.0, 0.20, 0.0),
    },
];

const OPENAI_MODELS: &[Builtin] = &[
    Builtin {
        id: "gpt-5",
        name: "GPT-5",
        reasoning: true,
        image_input: true,
        context_window: 400_000,
        max_tokens: 128_000,
        pricing: price(1.25, 10.0, 0.125, 0.0),
    },
    Builtin {
        id: "gpt-5-mini",
        name: "GPT-5 mini",
        reasoning: true,
        image_input: true,
        context_window: 400_000,
        max_tokens: 128_000,
        pricing: price(0.25, 2.0, 0.025, 0.0),
    },
    Builtin {
        id: "gpt-5-nano",
        name: "GPT-5 nano",
        reasoning: true,
        image_input: true,
        context_window: 400_000,
        max_tokens: 128_000,
        pricing: price(0.05, 0.4, 0.005, 0.0),
    },
    Builtin {
        id: "gpt-4.1",
        name: "GPT-4.1",
        reasoning: false,
        image_input: true,
        context_window: 1_047_576,
        max_tokens: 32_768,
        pricing: price(2.0, 8.0, 0.5, 0.0),
    },
    Builtin {
        id: "gpt-4o",
        name: "GPT-4o",
        reasoning: false,
        image_input: true,
        context_window: 128_000,
        max_tokens: 16_384,
        pricing: price(2.5, 10.0, 1.25, 0.0),
    },
    Builtin {
        id: "o3",
        name: "o3",
        reasoning: true,
        image_input: true,
        context_window: 200_000,
        max_tokens: 100_000,
        pricing: price(2.0, 8.0, 0.5, 0.0),
    },
    Builtin {
        id: "o4-mini",
        name: "o4-mini",
        reasoning: true,
        image_input: true,
        context_window: 200_000,
        max_tokens: 100_000,
        pricing: price(1.1, 4.4, 0.275, 0.0),
    },
];

/// The catalog: built-in providers merged with the config file's.
#[derive(Clone, Debug, Default)]
pub struct Catalog {
    providers: BTreeMap<String, Provider>,
}

/// Reads an environment variable the way the providers' SDKs do: unset and
/// empty are the same thing.
pub type EnvLookup<'a> = &'a dyn Fn(&str) -> Option<String>;

impl Catalog {
    /// Builds the catalog. `env` supplies `ANTHROPIC_BASE_URL` and
    /// `OPENAI_BASE_URL`, which move the built-in providers the same way they
    /// move the official SDKs.
    pub fn new(config: &BTreeMap<String, ProviderConfig>, env: EnvLookup<'_>) -> Self {
        let mut providers = BTreeMap::new();
        let anthropic_base =
            env("ANTHROPIC_BASE_URL").unwrap_or_else(|| "https://api.anthropic.com".to_string());
        providers.insert(
            "anthropic".to_string(),
            builtin_provider(
                "anthropic",
                Api::AnthropicMessages,
                &anthropic_base,
                Some("ANTHROPIC_API_KEY"),
                false,
                ANTHROPIC_MODELS,
            ),
        );
        let openai_base =
            env("OPENAI_BASE_URL").unwrap_or_else(|| "https://api.openai.com/v1".to_string());
        // OpenAI itself gets the Responses API (reasoning carried across
        // turns); an OPENAI_BASE_URL usually points at a compatible server
        // or proxy, which speaks Chat Completions.
        let openai_api = if env("OPENAI_BASE_URL").is_some() {
            Api::OpenaiCompletions
        } else {
            Api::OpenaiResponses
        };
        providers.insert(
            "openai".to_string(),
            builtin_provider(
                "openai",
                openai_api,
                &openai_base,
                Some("OPENAI_API_KEY"),
                false,
                OPENAI_MODELS,
            ),
        );
        let gemini_base = env("GEMINI_BASE_URL")
            .unwrap_or_else(|| "https://generativelanguage.googleapis.com/v1beta".to_string());
        providers.insert(
            "google".to_string(),
            builtin_provider(
                "google",
                Api::GoogleGenerativeAi,
                &gemini_base,
                Some("GEMINI_API_KEY"),
                false,
                GOOGLE_MODELS,
            ),
        );
        // A Bedrock API key, else SigV4 with the AWS credential chain (so
        // no key is required up front).
        let bedrock_base = env("AWS_ENDPOINT_URL_BEDROCK_RUNTIME")
            .unwrap_or_else(|| super::bedrock::ENDPOINT_TEMPLATE.to_string());
        providers.insert(
            "amazon-bedrock".to_string(),
            builtin_provider(
                "amazon-bedrock",
                Api::BedrockConverseStream,
                &bedrock_base,
                Some("AWS_BEARER_TOKEN_BEDROCK"),
                true,
                BEDROCK_MODELS,
            ),
        );
        let ollama_base = env("OLLAMA_HOST")
            .map(|host| format!("{}/v1", normalize_ollama_host(&host)))
            .unwrap_or_else(|| "http://127.0.0.1:11434/v1".to_string());
        providers.insert(
            "ollama".to_string(),
            builtin_provider(
                "ollama",
                Api::OpenaiCompletions,
                &ollama_base,
                None,
                true,
                &[],
            ),
        );
        // A Claude subscription, reached only through the user's own
        // Claude Code CLI: pincer never holds its credentials, so the
        // provider has no key and no address of its own to call.
        for name in SUBSCRIPTION_PROVIDERS {
            let mut provider = builtin_provider(
                name,
                Api::AnthropicMessages,
                &anthropic_base,
                None,
                true,
                ANTHROPIC_MODELS,
            );
            provider.runtime = RuntimeKind::ClaudeCode;
            providers.insert(name.to_string(), provider);
        }
        providers.insert(
            "openrouter".to_string(),
            builtin_provider(
                "openrouter",
                Api::OpenaiCompletions,
                "https://openrouter.ai/api/v1",
                Some("OPENROUTER_API_KEY"),
                false,
                &[],
            ),
        );

        for (name, pc) in config {
            let entry = providers.entry(name.clone()).or_insert_with(|| Provider {
                name: name.clone(),
                api: pc.api.unwrap_or(Api::OpenaiCompletions),
                base_url: String::new(),
                api_key_env: None,
                api_key: None,
                key_optional: true,
                headers: Vec::new(),
                models: Vec::new(),
                runtime: RuntimeKind::Native,
                claude_path: None,
                model_runtimes: BTreeMap::new(),
            });
            if let Some(runtime) = pc.runtime
                && !SUBSCRIPTION_PROVIDERS.contains(&name.as_str())
            {
                entry.runtime = runtime;
            }
            if let Some(path) = pc.claude_path.as_ref().filter(|p| !p.trim().is_empty()) {
                entry.claude_path = Some(path.clone());
            }
            if let Some(api) = pc.api {
                entry.api = api;
            }
            if let Some(base) = &pc.base_url {
                entry.base_url = trim_slash(base);
            }
            if let Some(key_env) = &pc.api_key_env {
                entry.api_key_env = Some(key_env.clone());
                entry.key_optional = false;
            }
            if let Some(key) = pc.api_key.as_ref().filter(|k| !k.expose().is_empty()) {
                entry.api_key = Some(key.clone());
            }
            entry
                .headers
                .extend(pc.headers.iter().map(|(k, v)| (k.clone(), v.clone())));
            for mc in &pc.models {
                if let Some(runtime) = mc.runtime
                    && !SUBSCRIPTION_PROVIDERS.contains(&name.as_str())
                {
                    entry.model_runtimes.insert(mc.id.clone(), runtime);
                }
                let base = entry
                    .models
                    .iter()
                    .position(|m| m.id == mc.id)
                    .map(|i| entry.models.remove(i));
                let mut model = base.unwrap_or_else(|| default_model(entry, &mc.id));
                apply_model_config(&mut model, mc);
                entry.models.push(model);
            }
            // A provider-level change reaches models defined before it.
            for model in &mut entry.models {
                model.api = entry.api;
                model.base_url = entry.base_url.clone();
                model.headers = entry.headers.clone();
            }
        }
        Self { providers }
    }

    /// Whether `name` is one of pincer's built-in providers.
    pub fn is_builtin(name: &str) -> bool {
        Catalog::new(&BTreeMap::new(), &|_| None)
            .providers
            .contains_key(name)
    }

    pub fn provider(&self, name: &str) -> Option<&Provider> {
        self.providers.get(name)
    }

    /// The names of every provider, built-in and configured.
    pub fn provider_names(&self) -> impl Iterator<Item = &str> {
        self.providers.keys().map(String::as_str)
    }

    /// The providers pincer can hold a credential for: all but the
    /// subscription providers, whose login is Claude Code's own.
    pub fn keyed_provider_names(&self) -> impl Iterator<Item = &str> {
        self.provider_names()
            .filter(|name| !SUBSCRIPTION_PROVIDERS.contains(name))
    }

    /// Resolves `provider/model`. A model the provider does not list is still
    /// usable with default limits: local servers grow new models every day.
    pub fn resolve(&self, full_id: &str) -> Result<Model, CatalogError> {
        let (provider, id) = full_id
            .split_once('/')
            .filter(|(p, m)| !p.is_empty() && !m.is_empty())
            .ok_or_else(|| CatalogError::BadId(full_id.to_string()))?;
        let p = self
            .providers
            .get(provider)
            .ok_or_else(|| CatalogError::UnknownProvider {
                provider: provider.to_string(),
                known: self
                    .providers
                    .keys()
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", "),
            })?;
        if p.base_url.is_empty() {
            return Err(CatalogError::NoBaseUrl(provider.to_string()));
        }
        Ok(p.models
            .iter()
            .find(|m| m.id == id)
            .cloned()
            .unwrap_or_else(|| default_model(p, id)))
    }

    /// Where `model`'s turns go when its provider runs them through Claude
    /// Code; `None` for pincer's own loop. Only Claude models on the
    /// Anthropic Messages API can: Claude Code speaks to nothing else, so
    /// other models of such a provider stay on the native loop.
    pub fn claude_code(&self, model: &Model) -> Option<ClaudeCodeTarget> {
        let provider = self.providers.get(&model.provider)?;
        let runtime = provider
            .model_runtimes
            .get(&model.id)
            .copied()
            .unwrap_or(provider.runtime);
        if runtime != RuntimeKind::ClaudeCode || !is_claude(model) {
            return None;
        }
        let native = if SUBSCRIPTION_PROVIDERS.contains(&model.provider.as_str()) {
            format!("anthropic/{}", model.id)
        } else {
            model.full_id()
        };
        Some(ClaudeCodeTarget {
            path: provider
                .claude_path
                .clone()
                .unwrap_or_else(|| DEFAULT_CLAUDE_PATH.to_string()),
            native,
        })
    }

    /// Every model pincer knows by name, for pickers.
    pub fn listed_models(&self) -> impl Iterator<Item = &Model> {
        self.providers.values().flat_map(|p| p.models.iter())
    }
}

/// Why a model id could not be resolved.
#[derive(Clone, Debug, thiserror::Error, PartialEq)]
pub enum CatalogError {
    #[error("model id `{0}` is not of the form provider/model (e.g. anthropic/claude-sonnet-4-5)")]
    BadId(String),
    #[error(
        "unknown provider `{provider}`; known providers: {known}. Define it under [providers.{provider}] in config.toml"
    )]
    UnknownProvider { provider: String, known: String },
    #[error("provider `{0}` has no base_url; set [providers.{0}] base_url in config.toml")]
    NoBaseUrl(String),
}

fn builtin_provider(
    name: &str,
    api: Api,
    base_url: &str,
    api_key_env: Option<&str>,
    key_optional: bool,
    models: &[Builtin],
) -> Provider {
    let mut provider = Provider {
        name: name.to_string(),
        api,
        base_url: trim_slash(base_url),
        api_key_env: api_key_env.map(str::to_string),
        api_key: None,
        key_optional,
        headers: Vec::new(),
        models: Vec::new(),
        runtime: RuntimeKind::Native,
        claude_path: None,
        model_runtimes: BTreeMap::new(),
    };
    provider.models = models
        .iter()
        .map(|b| Model {
            provider: name.to_string(),
            id: b.id.to_string(),
            name: b.name.to_string(),
            api,
            base_url: provider.base_url.clone(),
            reasoning: b.reasoning,
            image_input: b.image_input,
            context_window: b.context_window,
            max_tokens: b.max_tokens,
            pricing: b.pricing,
            headers: Vec::new(),
        })
        .collect();
    provider
}

/// A Claude model on the Anthropic Messages API: what Claude Code can run.
fn is_claude(model: &Model) -> bool {
    model.api == Api::AnthropicMessages && model.id.to_ascii_lowercase().contains("claude")
}

fn default_model(provider: &Provider, id: &str) -> Model {
    Model {
        provider: provider.name.clone(),
        id: id.to_string(),
        name: id.to_string(),
        api: provider.api,
        base_url: provider.base_url.clone(),
        reasoning: false,
        image_input: false,
        context_window: DEFAULT_CONTEXT_WINDOW,
        max_tokens: DEFAULT_MAX_TOKENS,
        pricing: Pricing::default(),
        headers: provider.headers.clone(),
    }
}

fn apply_model_config(model: &mut Model, mc: &ModelConfig) {
    if let Some(name) = &mc.name {
        model.name = name.clone();
    }
    if let Some(v) = mc.reasoning {
        model.reasoning = v;
    }
    if let Some(v) = mc.image_input {
        model.image_input = v;
    }
    if let Some(v) = mc.context_window {
        model.context_window = v;
    }
    if let Some(v) = mc.max_tokens {
        model.max_tokens = v;
    }
    if let Some(v) = mc.pricing {
        model.pricing = v;
    }
}

fn trim_slash(url: &str) -> String {
    url.trim_end_matches('/').to_string()
}

/// `OLLAMA_HOST` may be `0.0.0.0:11434`, `localhost` or a full URL.
fn normalize_ollama_host(host: &str) -> String {
    let host = trim_slash(host);
    let with_scheme = if host.contains("://") {
        host
    } else {
        format!("http://{host}")
    };
    let after_scheme = with_scheme.split("://").nth(1).unwrap_or_default();
    if after_scheme.contains(':') {
        with_scheme
    } else {
        format!("{with_scheme}:11434")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn no_env(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn builtin_models_resolve_with_their_limits() {
        let catalog = Catalog::new(&BTreeMap::new(), &no_env);
        let model = catalog.resolve("anthropic/claude-sonnet-4-5").unwrap();
        assert_eq!(model.base_url, "https://api.anthropic.com");
        assert_eq!(model.context_window, 200_000);
        assert_eq!(model.api, Api::AnthropicMessages);
        let model = catalog.resolve("openai/gpt-5").unwrap();
        assert_eq!(model.base_url, "https://api.openai.com/v1");
    }

    #[test]
    fn base_url_env_vars_move_builtin_providers() {
        let env = |k: &str| match k {
            "ANTHROPIC_BASE_URL" => Some("http://127.0.0.1:9/".to_string()),
            "OPENAI_BASE_URL" => Some("http://127.0.0.1:8/v1".to_string()),
            _ => None,
        };
        let catalog = Catalog::new(&BTreeMap::new(), &env);
        assert_eq!(
            catalog
                .resolve("anthropic/claude-haiku-4-5")
                .unwrap()
                .base_url,
            "http://127.0.0.1:9"
        );
        assert_eq!(
            catalog.resolve("openai/gpt-5").unwrap().base_url,
            "http://127.0.0.1:8/v1"
        );
    }

    #[test]
    fn unknown_models_of_known_providers_get_defaults() {
        let catalog = Catalog::new(&BTreeMap::new(), &no_env);
        let model = catalog.resolve("ollama/qwen3").unwrap();
        assert_eq!(model.base_url, "http://127.0.0.1:11434/v1");
        assert_eq!(model.context_window, DEFAULT_CONTEXT_WINDOW);
        assert_eq!(model.api, Api::OpenaiCompletions);
    }

    #[test]
    fn ollama_host_forms() {
        assert_eq!(normalize_ollama_host("0.0.0.0"), "http://0.0.0.0:11434");
        assert_eq!(normalize_ollama_host("gpu:1234"), "http://gpu:1234");
        assert_eq!(
            normalize_ollama_host("https://ollama.lan/"),
            "https://ollama.lan:11434"
        );
    }

    #[test]
    fn claude_code_runs_claude_models_of_the_providers_that_choose_it() {
        let config: BTreeMap<String, ProviderConfig> = toml::from_str(
            r#"
[anthropic]
runtime = "claude-code"
claude_path = "/opt/claude/bin/claude"
models = [{ id = "claude-haiku-4-5", runtime = "native" }]
[claude-pro]
runtime = "native"
[openrouter]
models = [{ id = "claude-opus-4-5", runtime = "claude-code" }]
[vertex]
api = "anthropic-messages"
base_url = "http://vertex:1"
models = [{ id = "claude-sonnet-4-5", runtime = "claude-code" }]
[lab]
api = "openai-completions"
base_url = "http://lab:1/v1"
runtime = "claude-code"
"#,
        )
        .unwrap();
        let catalog = Catalog::new(&config, &no_env);
        let target = |id: &str| catalog.claude_code(&catalog.resolve(id).unwrap());
        assert_eq!(
            target("anthropic/claude-sonnet-4-5"),
            Some(ClaudeCodeTarget {
                path: "/opt/claude/bin/claude".into(),
                native: "anthropic/claude-sonnet-4-5".into(),
            })
        );
        // A subscription provider always runs there, whatever the config
        // says, and falls back to the same model on the API.
        for provider in SUBSCRIPTION_PROVIDERS {
            assert_eq!(
                target(&format!("{provider}/claude-opus-4-5")),
                Some(ClaudeCodeTarget {
                    path: DEFAULT_CLAUDE_PATH.into(),
                    native: "anthropic/claude-opus-4-5".into(),
                })
            );
        }
        // A model may choose otherwise than its provider.
        assert_eq!(target("anthropic/claude-haiku-4-5"), None);
        assert_eq!(
            target("vertex/claude-sonnet-4-5").map(|t| t.native),
            Some("vertex/claude-sonnet-4-5".to_string())
        );
        assert_eq!(target("vertex/claude-opus-4-5"), None);
        // Claude Code speaks Claude on the Messages API and nothing else.
        assert_eq!(target("openrouter/claude-opus-4-5"), None);
        assert_eq!(target("lab/claude-like"), None);
        assert_eq!(target("anthropic/some-other-model"), None);
        assert_eq!(target("openai/gpt-5"), None);
        let plain = Catalog::new(&BTreeMap::new(), &no_env);
        assert_eq!(
            plain.claude_code(&plain.resolve("anthropic/claude-sonnet-4-5").unwrap()),
            None,
            "native by default"
        );
    }

    #[test]
    fn custom_providers_and_models_from_config() {
        let mut config = BTreeMap::new();
        config.insert(
            "vllm".to_string(),
            ProviderConfig {
                api: Some(Api::OpenaiCompletions),
                base_url: Some("http://gpu:8000/v1/".to_string()),
                api_key_env: Some("VLLM_KEY".to_string()),
                api_key: None,
                headers: BTreeMap::from([("X-Team".to_string(), "a".to_string())]),
                models: vec![ModelConfig {
                    id: "qwen3-coder".to_string(),
                    context_window: Some(32_768),
                    ..Default::default()
                }],
                ..Default::default()
            },
        );
        let catalog = Catalog::new(&config, &no_env);
        let model = catalog.resolve("vllm/qwen3-coder").unwrap();
        assert_eq!(model.base_url, "http://gpu:8000/v1");
        assert_eq!(model.context_window, 32_768);
        assert_eq!(model.headers, vec![("X-Team".to_string(), "a".to_string())]);
        assert_eq!(
            catalog.provider("vllm").unwrap().api_key_env.as_deref(),
            Some("VLLM_KEY")
        );
    }

    #[test]
    fn bad_ids_say_what_is_wrong() {
        let catalog = Catalog::new(&BTreeMap::new(), &no_env);
        assert_eq!(
            catalog.resolve("gpt-5"),
            Err(CatalogError::BadId("gpt-5".to_string()))
        );
        assert!(matches!(
            catalog.resolve("nope/x"),
            Err(CatalogError::UnknownProvider { .. })
        ));
    }
}
