//! The `pincer` command: parses the command line and hands over to the library.
#![allow(clippy::print_stderr)]

use clap::{Parser, Subcommand};
use pincer::cli::run::{Continue, OutputFormat, RunMode, RunOptions, Verbosity};

/// mimalloc instead of the system allocator: reopening a long session
/// allocates and frees hundreds of thousands of small strings on several
/// threads, and `benches/sessions.rs` measured `session/load` of a
/// 10,000-entry transcript at 88 ms with glibc's allocator and 50 ms with
/// this one (75 ms without transparent huge pages, which it is built
/// without: with them, resident memory of a streaming session doubled).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Raises the soft limit on open files to the hard one. The usual soft
/// limit (1,024) is a leftover of `select()`; a gateway serving many
/// clients, or `pincer acp` with many sessions, MCP servers and terminals,
/// needs more, and the hard limit (often 500,000 and more) is what the
/// system grants this user. A failure leaves the limit as it was.
#[cfg(unix)]
fn raise_open_files_limit() {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else {
        return;
    };
    // macOS refuses an unlimited soft limit for files: it stops at
    // OPEN_MAX (10,240).
    #[cfg(target_os = "macos")]
    let target = hard.min(10_240);
    #[cfg(not(target_os = "macos"))]
    let target = hard;
    if soft >= target {
        return;
    }
    if let Err(error) = setrlimit(Resource::RLIMIT_NOFILE, target, hard) {
        tracing::debug!(%error, soft, hard, "cannot raise the limit on open files");
    }
}

#[cfg(not(unix))]
fn raise_open_files_limit() {}

/// A coding agent for editors, speaking the Agent Client Protocol.
#[derive(Parser, Debug)]
#[command(
    name = "pincer",
    version,
    about,
    long_about = None,
    after_help = "MCP servers: editors pass their context servers to each session; servers for pincer itself go under [mcp.servers.<name>] (command/args/env or url/headers, timeout, allow/deny, enabled) in config.toml, or in a project's .pincer/config.toml once you trust the project (pincer trust). Their tools appear as mcp__<server>__<tool>; `pincer mcp list` shows them."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// `pincer sandbox …`.
#[derive(Subcommand, Debug)]
enum SandboxCommand {
    /// Show what the sandbox allows commands in a directory, and try it:
    /// a write outside the project, a read of ~/.ssh and a connection to
    /// this machine's loopback must be stopped. Exits non-zero when the
    /// sandbox is not available or did not hold.
    Check {
        /// The project directory (default: the current one).
        #[arg(long)]
        cwd: Option<std::path::PathBuf>,
    },
    /// Confine this process to a policy and run PROGRAM in it (what pincer
    /// runs every command through; Linux).
    Exec {
        /// The policy, as pincer writes it.
        #[arg(long)]
        policy: String,
        /// The program and its arguments.
        #[arg(last = true, required = true)]
        program: Vec<String>,
    },
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Serve the Agent Client Protocol on stdin/stdout (what editors run).
    Acp {
        /// Model for new sessions, as provider/model (e.g. anthropic/claude-sonnet-4-5).
        #[arg(long, value_name = "PROVIDER/MODEL")]
        model: Option<String>,
        /// Also open the websocket gateway (see `pincer gateway`) in this
        /// process, sharing its sessions: a web page or a phone can follow
        /// and steer the session the editor runs. ADDR is HOST:PORT, HOST
        /// or :PORT (default [gateway] in config.toml, else 127.0.0.1:18789).
        #[arg(long, value_name = "ADDR", num_args = 0..=1, default_missing_value = "")]
        gateway: Option<String>,
        /// Run the sessions on a gateway elsewhere (pincer's or OpenClaw's)
        /// instead of here: ws://HOST:PORT or wss://HOST:PORT. The
        /// credential comes from --token-file, --password-file, --token or
        /// $PINCER_GATEWAY_TOKEN ($PINCER_GATEWAY_PASSWORD), never the URL.
        #[arg(long, value_name = "URL", conflicts_with_all = ["gateway", "model"])]
        connect: Option<String>,
        /// The gateway's token (visible to other users in process lists:
        /// prefer --token-file).
        #[arg(long, value_name = "TOKEN", requires = "connect", conflicts_with_all = ["token_file", "password_file"])]
        token: Option<String>,
        /// A file holding the gateway's token.
        #[arg(
            long,
            value_name = "FILE",
            requires = "connect",
            conflicts_with = "password_file"
        )]
        token_file: Option<std::path::PathBuf>,
        /// A file holding the gateway's password.
        #[arg(long, value_name = "FILE", requires = "connect")]
        password_file: Option<std::path::PathBuf>,
        /// Attach every new ACP session to this gateway session key (for
        /// example one a chat channel started).
        #[arg(
            long,
            value_name = "KEY",
            requires = "connect",
            conflicts_with = "session_label"
        )]
        session: Option<String>,
        /// Attach to the session the gateway finds by this label.
        #[arg(long, value_name = "LABEL", requires = "connect")]
        session_label: Option<String>,
        /// Fail session/new when --session or --session-label names no
        /// existing session.
        #[arg(long, requires = "connect")]
        require_existing: bool,
        /// Start the session key over (a fresh transcript; the old one stays).
        #[arg(long, requires = "connect")]
        reset_session: bool,
        /// How to talk to the gateway: `acp` carries ACP itself over a
        /// pincer gateway's /acp (nothing translated; sessions end with
        /// the connection), `openclaw` its gateway protocol (runs go on
        /// across a dropped connection; the only one OpenClaw's gateway
        /// and --session keys speak), `auto` ACP when the far end offers
        /// it.
        #[arg(long, value_enum, requires = "connect", default_value_t = pincer::bridge::Protocol::Auto)]
        protocol: pincer::bridge::Protocol,
    },
    /// Serve OpenClaw's gateway protocol on a websocket, loopback by
    /// default: OpenClaw's clients (`openclaw acp --url …`), web pages and
    /// scripts reach pincer's agent and sessions. Clients authenticate
    /// with the token of `pincer gateway token` (or $PINCER_GATEWAY_TOKEN).
    Gateway {
        #[command(subcommand)]
        action: Option<GatewayCommand>,
        /// The address to listen on (default 127.0.0.1; anything else needs
        /// a configured token or password).
        #[arg(long, value_name = "ADDR")]
        bind: Option<String>,
        /// The port (default 18789; 0 picks a free one).
        #[arg(long, value_name = "N")]
        port: Option<u16>,
        /// Model for new sessions, as provider/model.
        #[arg(long, value_name = "PROVIDER/MODEL")]
        model: Option<String>,
        /// The PostgreSQL database this gateway shares with the other
        /// replicas of a team gateway (`[cluster] store`).
        #[arg(long, value_name = "postgres://…")]
        store: Option<String>,
        /// The NATS server over which the replicas of a team gateway tell
        /// each other what their sessions do (`[cluster] bus`).
        #[arg(long, value_name = "nats://…")]
        bus: Option<String>,
    },
    /// Run one prompt headless and print the answer. The prompt is the
    /// argument, or what is piped to stdin (`echo … | pincer run`, `pincer
    /// run -`), or both (`cat log | pincer run "explain this"`: the
    /// argument, then stdin inside <stdin> tags). Each run is a session,
    /// listed by `pincer sessions list` and continued with --continue or
    /// --resume.
    #[command(after_help = pincer::cli::run::EXIT_CODES_HELP)]
    Run {
        /// What to ask; `-` or nothing reads it from stdin.
        prompt: Option<String>,
        /// Model to use, as provider/model.
        #[arg(long, value_name = "PROVIDER/MODEL")]
        model: Option<String>,
        /// Same as --output-format stream-json.
        #[arg(long, conflicts_with = "output_format")]
        json: bool,
        /// text: the answer; json: one result object at the end;
        /// stream-json: a start event, the session/update notifications an
        /// editor would get, then the result object (NDJSON).
        #[arg(long, value_enum, default_value = "text")]
        output_format: OutputFormat,
        /// What may happen without asking.
        #[arg(long, value_enum, default_value = "read-only")]
        mode: RunMode,
        /// Trust this project's .pincer/config.toml for this run (its MCP
        /// servers, providers, model); without it, a run honours only the
        /// keys that narrow what pincer does.
        #[arg(long)]
        trust: bool,
        /// Instructions added to the system prompt for this run, after the
        /// project's context (AGENTS.md and the like).
        #[arg(long, value_name = "TEXT")]
        append_system_prompt: Option<String>,
        /// The working directory (default: the current one).
        #[arg(long, value_name = "DIR")]
        cwd: Option<std::path::PathBuf>,
        /// Continue the most recent session of the working directory.
        #[arg(long = "continue", conflicts_with = "resume")]
        continue_last: bool,
        /// Continue the session with this id (a unique prefix is enough).
        #[arg(long, value_name = "ID")]
        resume: Option<String>,
        /// Stop after this many model calls (exit code 5).
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
        max_turns: Option<u32>,
        /// Offer only these tools (names or groups such as group:fs, comma
        /// separated); narrows what config.toml allows.
        #[arg(long, value_name = "TOOLS")]
        allowed_tools: Vec<String>,
        /// Never offer these tools (names or groups, comma separated).
        #[arg(long, value_name = "TOOLS")]
        disallowed_tools: Vec<String>,
        /// Override a config.toml key for this run (repeatable), e.g.
        /// -c max_retries=0 -c compaction.enabled=false.
        #[arg(short = 'c', long = "config", value_name = "KEY=VALUE")]
        config: Vec<String>,
        /// Print only the answer (and errors): no tool activity.
        #[arg(long, short = 'q', conflicts_with = "verbose")]
        quiet: bool,
        /// Also print the session, model and a closing line with tokens,
        /// cost and time (on stderr).
        #[arg(long, short = 'v')]
        verbose: bool,
    },
    /// Trust a project's configuration (.pincer/config.toml) as it is now:
    /// its MCP servers start, its providers and model apply. Changing the
    /// file makes it untrusted again.
    Trust {
        /// The project directory (default: the current one).
        dir: Option<std::path::PathBuf>,
        /// List the projects you trusted or rejected instead.
        #[arg(long, conflicts_with = "dir")]
        list: bool,
    },
    /// Forget that you trusted (or rejected) a project's configuration.
    Untrust {
        /// The project directory (default: the current one).
        dir: Option<std::path::PathBuf>,
    },
    /// The tools the model is offered here, and which policy step removed
    /// each one that is not.
    Tools {
        /// The project directory (default: the current one).
        #[arg(long)]
        cwd: Option<std::path::PathBuf>,
        /// Model to check, as provider/model (default: the configured one).
        #[arg(long, value_name = "PROVIDER/MODEL")]
        model: Option<String>,
        /// Session mode to check: default, accept-edits, plan, bypass.
        #[arg(long)]
        mode: Option<String>,
        /// One JSON object per line.
        #[arg(long)]
        json: bool,
    },
    /// MCP servers configured for pincer (`[mcp.servers.<name>]`): their
    /// state and tools.
    Mcp {
        #[command(subcommand)]
        command: McpCommand,
    },
    /// A team gateway's shared state ([cluster] store): its replicas and
    /// the scheduled runs they claimed.
    Cluster {
        #[command(subcommand)]
        command: ClusterCommand,
    },
    /// The gateway's scheduled runs ([[cron]] jobs and the [heartbeat]):
    /// schedules, next and last runs. Works without a gateway running.
    Cron {
        #[command(subcommand)]
        command: CronCommand,
    },
    /// Workflows (`<config dir>/workflows/*.toml`, a trusted project's
    /// `.pincer/workflows/*.toml`): list, check, dry-run, run, resume.
    Workflow {
        #[command(subcommand)]
        command: WorkflowCommand,
    },
    /// Who may use the chat channels: approve a pairing code, list users.
    Channels {
        #[command(subcommand)]
        command: ChannelsCommand,
    },
    /// List, show, delete, rewind or fork stored sessions.
    Sessions {
        #[command(subcommand)]
        command: SessionsCommand,
    },
    /// Stored credentials.
    Auth {
        #[command(subcommand)]
        command: AuthCommand,
    },
    /// Store a credential for a provider. Without --provider (or without
    /// --api-key / --oauth), asks on the terminal.
    Login {
        /// The provider (anthropic, openai, …).
        #[arg(long)]
        provider: Option<String>,
        /// Read an API key from stdin.
        #[arg(long, conflicts_with = "oauth")]
        api_key: bool,
        /// Log in through the provider's OAuth page (PKCE).
        #[arg(long)]
        oauth: bool,
        /// The profile id (default `<provider>:default` for an API key,
        /// `<provider>:oauth` for an OAuth login).
        #[arg(long)]
        profile: Option<String>,
    },
    /// Remove a stored credential.
    Logout {
        /// The profile id, as `pincer auth list` shows it.
        profile: String,
    },
    /// Check the setup: config files read, credentials per provider (never
    /// the secrets), whether the model's endpoint answers, trust of this
    /// directory, MCP servers, versions. Exits non-zero when something
    /// needed is broken.
    Doctor {
        /// The project directory to check (default: the current one).
        #[arg(long)]
        cwd: Option<std::path::PathBuf>,
        /// Model to check, as provider/model (default: the configured one).
        #[arg(long, value_name = "PROVIDER/MODEL")]
        model: Option<String>,
        /// One JSON object with every check.
        #[arg(long)]
        json: bool,
    },
    /// The sandbox commands run in: `check` shows what it allows here and
    /// tries it.
    Sandbox {
        #[command(subcommand)]
        command: SandboxCommand,
    },
    /// Print a shell completion script, e.g.
    /// `pincer completions bash > ~/.local/share/bash-completion/completions/pincer`.
    Completions {
        /// bash, zsh, fish (also elvish, powershell).
        shell: pincer::cli::completions::Shell,
    },
}

#[derive(Subcommand, Debug)]
enum GatewayCommand {
    /// Create a new random token (256 bits) for gateway clients, stored
    /// readable by you alone; prints where.
    Token {
        /// Print the token itself too.
        #[arg(long)]
        print: bool,
    },
}

#[derive(Subcommand, Debug)]
enum AuthCommand {
    /// Profiles with kind, expiry and cooldown (never the secret).
    List {
        /// One JSON object per line.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand, Debug)]
enum McpCommand {
    /// Starts each configured server, then lists its state and tools.
    List {
        /// The project directory whose .pincer/config.toml counts too
        /// (default: the current one).
        #[arg(long)]
        cwd: Option<std::path::PathBuf>,
        /// One JSON object per line.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand, Debug)]
enum ClusterCommand {
    /// Each replica (alive if it renewed its presence within the lease)
    /// and the latest scheduled runs claimed.
    Status {
        /// The store, instead of [cluster] store.
        #[arg(long, value_name = "postgres://…")]
        store: Option<String>,
        /// As one JSON object.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand, Debug)]
enum CronCommand {
    /// Each job: name, schedule, time zone, next run, last run, target,
    /// session, missed-run policy; and the heartbeat.
    List {
        /// The list as one JSON object (the gateway's `cron.list`).
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand, Debug)]
enum WorkflowCommand {
    /// Each workflow: name, description, inputs, file.
    List,
    /// Checks every workflow file; names the file, line and step of each
    /// problem.
    Check,
    /// The path a run would take, one step id a line, for the step outputs
    /// in FILE (JSON or TOML: step id → output), calling nothing.
    DryRun {
        name: String,
        #[arg(long = "outputs", value_name = "FILE")]
        outputs: std::path::PathBuf,
        /// An input, NAME=VALUE (repeatable).
        #[arg(long = "input", value_name = "NAME=VALUE")]
        inputs: Vec<String>,
    },
    /// Run a workflow headless, as a session (`pincer sessions list` shows
    /// it). text prints the last step's output on stdout and each step on
    /// stderr; json one result object; stream-json the plan and every
    /// session/update an editor would get, then the result.
    #[command(after_help = pincer::cli::workflow::EXIT_CODES_HELP)]
    Run {
        name: String,
        /// An input, NAME=VALUE (repeatable).
        #[arg(long = "input", value_name = "NAME=VALUE")]
        inputs: Vec<String>,
        #[command(flatten)]
        common: WorkflowRunArgs,
    },
    /// Finish the workflow run a killed process left behind in a session,
    /// from its last finished step.
    #[command(after_help = pincer::cli::workflow::EXIT_CODES_HELP)]
    Resume {
        /// The session id (a unique prefix is enough); default: the most
        /// recent session of the working directory.
        session: Option<String>,
        #[command(flatten)]
        common: WorkflowRunArgs,
    },
}

/// What `pincer workflow run` and `resume` share with `pincer run`.
#[derive(clap::Args, Debug)]
struct WorkflowRunArgs {
    /// Model for llm steps that name none, as provider/model.
    #[arg(long, value_name = "PROVIDER/MODEL")]
    model: Option<String>,
    /// Same as --output-format stream-json.
    #[arg(long, conflicts_with = "output_format")]
    json: bool,
    #[arg(long, value_enum, default_value = "text")]
    output_format: OutputFormat,
    /// What tool steps may do without asking (nobody can be asked).
    #[arg(long, value_enum, default_value = "read-only")]
    mode: RunMode,
    /// Trust this project's configuration for this run (its workflows,
    /// MCP servers, providers).
    #[arg(long)]
    trust: bool,
    /// The working directory (default: the current one).
    #[arg(long, value_name = "DIR")]
    cwd: Option<std::path::PathBuf>,
    /// Override a config.toml key for this run (repeatable).
    #[arg(short = 'c', long = "config", value_name = "KEY=VALUE")]
    config: Vec<String>,
    /// Print only the result (and errors): no step activity.
    #[arg(long, short = 'q', conflicts_with = "verbose")]
    quiet: bool,
    /// Also print the session and a closing line (on stderr).
    #[arg(long, short = 'v')]
    verbose: bool,
}

impl WorkflowRunArgs {
    fn options(self, session: Continue) -> RunOptions {
        RunOptions {
            prompt: None,
            model: self.model,
            format: if self.json {
                OutputFormat::StreamJson
            } else {
                self.output_format
            },
            verbosity: match (self.quiet, self.verbose) {
                (true, _) => Verbosity::Quiet,
                (_, true) => Verbosity::Verbose,
                _ => Verbosity::Normal,
            },
            mode: self.mode,
            trust: self.trust,
            append_system_prompt: None,
            cwd: self.cwd,
            session,
            max_turns: None,
            allowed_tools: Vec::new(),
            disallowed_tools: Vec::new(),
            overrides: self.config,
        }
    }
}

#[derive(Subcommand, Debug)]
enum ChannelsCommand {
    /// Let the user who was given CODE use the agent through their channel.
    Approve { code: String },
    /// Approved users and pairing codes waiting.
    List,
}

#[derive(Subcommand, Debug)]
enum SessionsCommand {
    /// Stored sessions, newest first.
    List {
        /// Only sessions of this directory.
        #[arg(long)]
        cwd: Option<std::path::PathBuf>,
        /// One JSON object per line.
        #[arg(long)]
        json: bool,
    },
    /// A session's transcript, readable.
    Show { id: String },
    /// Delete a session.
    Delete { id: String },
    /// List a session's turns, or go back to before turn N: the files the
    /// turns changed are put back and the conversation the model sees
    /// ends before it (the transcript keeps everything).
    Rewind {
        id: String,
        /// The turn to go back to before, as the list numbers them.
        turn: Option<usize>,
        /// Restore without asking.
        #[arg(long)]
        yes: bool,
        /// Also overwrite files changed since the turns (by hand, by
        /// another session); without it they are kept and reported.
        #[arg(long)]
        overwrite: bool,
    },
    /// A new session with this one's conversation: all of it, or what
    /// came before turn N. Prints the new session's id.
    Fork {
        id: String,
        /// Fork before this turn.
        turn: Option<usize>,
        /// Also put the files back to that point.
        #[arg(long)]
        files: bool,
        /// With --files: restore without asking.
        #[arg(long)]
        yes: bool,
        /// With --files: also overwrite files changed since.
        #[arg(long)]
        overwrite: bool,
    },
}

/// The exit code of a command, with its error on stderr.
fn report(result: anyhow::Result<()>) -> i32 {
    match result {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("pincer: {e:#}");
            1
        }
    }
}

/// `--gateway`'s ADDR: `HOST:PORT`, `HOST`, `:PORT`, or nothing.
fn parse_address(address: &str) -> Result<(Option<String>, Option<u16>), String> {
    if address.is_empty() {
        return Ok((None, None));
    }
    let port = |p: &str| {
        p.parse::<u16>()
            .map_err(|_| format!("`{address}` is not HOST:PORT (the port must be a number)"))
    };
    if let Some(rest) = address.strip_prefix('[') {
        // [v6]:port or [v6]
        let (host, after) = rest
            .split_once(']')
            .ok_or_else(|| format!("`{address}` is missing its `]`"))?;
        let port = match after.strip_prefix(':') {
            Some(p) => Some(port(p)?),
            None if after.is_empty() => None,
            None => return Err(format!("`{address}` is not [HOST]:PORT")),
        };
        return Ok((Some(host.to_string()), port));
    }
    match address.rsplit_once(':') {
        Some((host, p)) if !host.contains(':') => {
            let host = (!host.is_empty()).then(|| host.to_string());
            Ok((host, Some(port(p)?)))
        }
        _ => Ok((Some(address.to_string()), None)),
    }
}

fn main() -> std::process::ExitCode {
    // `pincer sandbox exec` is the first step of every sandboxed command:
    // it confines itself and becomes the command, before anything else
    // (logging, the async runtime) starts a thread or costs time.
    #[cfg(target_os = "linux")]
    {
        let mut args = std::env::args_os().skip(1);
        if args.next().is_some_and(|a| a == "sandbox") && args.next().is_some_and(|a| a == "exec") {
            let code = pincer::tools::sandbox::linux::exec_main(args.collect());
            return std::process::ExitCode::from(u8::try_from(code).unwrap_or(1));
        }
    }
    init_logging();
    raise_open_files_limit();
    if let Ok(program) = std::env::current_exe() {
        pincer::tools::sandbox::set_launcher(program);
    }
    let cli = Cli::parse();
    let runtime = match runtime_for(&cli.command) {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("pincer: cannot start the async runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let runs_tools = runs_tools(&cli.command);
    if runs_tools {
        pincer::tools::prepare_process();
    }
    let code = runtime.block_on(dispatch(cli.command));
    // Stdin is read on a blocking thread that cannot be interrupted; do not
    // wait for it when the work is done.
    runtime.shutdown_background();
    if runs_tools {
        pincer::tools::end_process();
    }
    std::process::ExitCode::from(u8::try_from(code).unwrap_or(1))
}

/// The runtime a command runs on.
fn runtime_for(command: &Command) -> std::io::Result<tokio::runtime::Runtime> {
    // `pincer acp` waits on pipes and sockets almost all the time; one
    // thread avoids a cross-thread wake-up per streamed event. Blocking work
    // (files, processes) runs on tokio's blocking pool either way.
    let mut builder = match command {
        Command::Acp { gateway: None, .. } => tokio::runtime::Builder::new_current_thread(),
        _ => tokio::runtime::Builder::new_multi_thread(),
    };
    // File work (transcripts, tools) goes to tokio's blocking pool; a
    // gateway running a hundred sessions at once must not grow it to a
    // hundred threads, each with an allocator heap of its own.
    if matches!(
        command,
        Command::Gateway { .. }
            | Command::Acp {
                gateway: Some(_),
                ..
            }
    ) {
        builder.max_blocking_threads(16);
    }
    builder.enable_all().build()
}

/// Whether the command runs tools (and so prepares the process for them).
fn runs_tools(command: &Command) -> bool {
    matches!(
        command,
        Command::Acp { .. } | Command::Run { .. } | Command::Gateway { action: None, .. }
    )
}

/// Runs a command; its exit code.
async fn dispatch(command: Command) -> i32 {
    match command {
        command @ Command::Acp {
            connect: Some(_), ..
        } => acp_bridge(command).await,
        Command::Acp { model, gateway, .. } => acp(model, gateway).await,
        Command::Gateway {
            action: Some(GatewayCommand::Token { print }),
            ..
        } => pincer::cli::gateway_token(print),
        Command::Gateway {
            action: None,
            bind,
            port,
            model,
            store,
            bus,
        } => exit_code(
            pincer::gateway::serve(pincer::gateway::Options {
                bind,
                port,
                model,
                store,
                bus,
            })
            .await,
        ),
        Command::Tools {
            cwd,
            model,
            mode,
            json,
        } => tools(cwd, model, mode, json).await,
        Command::Mcp {
            command: McpCommand::List { cwd, json },
        } => report(pincer::cli::mcp::list(cwd, json).await),
        Command::Cron {
            command: CronCommand::List { json },
        } => report(pincer::cli::cron::list(json)),
        Command::Cluster {
            command: ClusterCommand::Status { store, json },
        } => report(pincer::cli::cluster::status(store, json).await),
        Command::Workflow { command } => workflow(command).await,
        Command::Channels { command } => report(match command {
            ChannelsCommand::Approve { code } => pincer::cli::channels::approve(&code),
            ChannelsCommand::List => pincer::cli::channels::list(),
        }),
        Command::Sessions { command } => report(match command {
            SessionsCommand::List { cwd, json } => pincer::cli::sessions::list(cwd, json).await,
            SessionsCommand::Show { id } => pincer::cli::sessions::show(&id).await,
            SessionsCommand::Delete { id } => pincer::cli::sessions::delete(&id),
            SessionsCommand::Rewind {
                id,
                turn,
                yes,
                overwrite,
            } => pincer::cli::sessions::rewind(&id, turn, yes, overwrite),
            SessionsCommand::Fork {
                id,
                turn,
                files,
                yes,
                overwrite,
            } => pincer::cli::sessions::fork(&id, turn, files, yes, overwrite),
        }),
        Command::Auth {
            command: AuthCommand::List { json },
        } => report(pincer::cli::auth::list(json)),
        Command::Login {
            provider,
            api_key,
            oauth,
            profile,
        } => login(provider, api_key, oauth, profile).await,
        Command::Logout { profile } => report(pincer::cli::auth::logout(&profile)),
        Command::Sandbox {
            command: SandboxCommand::Check { cwd },
        } => match pincer::cli::sandbox::check(cwd) {
            Ok(fine) => i32::from(!fine),
            Err(e) => {
                eprintln!("pincer: {e:#}");
                1
            }
        },
        Command::Sandbox {
            command: SandboxCommand::Exec { .. },
        } => {
            // On Linux `main` runs it before parsing anything.
            eprintln!("pincer: `pincer sandbox exec` confines commands on Linux only");
            125
        }
        Command::Doctor { cwd, model, json } => {
            match pincer::cli::doctor::doctor(cwd, model, json).await {
                Ok(healthy) => i32::from(!healthy),
                Err(e) => {
                    eprintln!("pincer: {e:#}");
                    1
                }
            }
        }
        Command::Completions { shell } => completions(shell),
        Command::Trust { list: true, .. } => report(pincer::cli::trust::list()),
        Command::Trust { dir, .. } => report(pincer::cli::trust::trust(dir)),
        Command::Untrust { dir } => report(pincer::cli::trust::untrust(dir)),
        command @ Command::Run { .. } => match run_options(command) {
            Some(options) => pincer::cli::run::run(options).await,
            None => 1,
        },
    }
}

/// The exit code of a server that ran until its end.
fn exit_code<E: std::fmt::Display>(result: Result<(), E>) -> i32 {
    match result {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("pincer: {e}");
            1
        }
    }
}

/// `pincer acp --connect URL`: the bridge to a gateway.
async fn acp_bridge(command: Command) -> i32 {
    let Command::Acp {
        connect: Some(url),
        token,
        token_file,
        password_file,
        session,
        session_label,
        require_existing,
        reset_session,
        protocol,
        ..
    } = command
    else {
        return 1;
    };
    if protocol == pincer::bridge::Protocol::Acp && (session.is_some() || session_label.is_some()) {
        eprintln!(
            "pincer: --session and --session-label name gateway session keys, which ACP over /acp does not have; use --protocol openclaw"
        );
        return 2;
    }
    let url = match pincer::bridge::check_url(&url) {
        Ok(url) => url,
        Err(e) => {
            eprintln!("pincer: {e}");
            return 2;
        }
    };
    let credential =
        match pincer::bridge::credential(token, token_file.as_deref(), password_file.as_deref()) {
            Ok(credential) => credential,
            Err(e) => {
                eprintln!("pincer: {e}");
                return 2;
            }
        };
    let options = pincer::bridge::BridgeOptions {
        url,
        credential,
        session,
        session_label,
        require_existing,
        reset_session,
        protocol,
    };
    exit_code(pincer::bridge::serve_stdio(options).await)
}

/// `pincer acp`, with the gateway in the same process for `--gateway`.
async fn acp(model: Option<String>, gateway: Option<String>) -> i32 {
    let registry = match gateway {
        None => None,
        Some(address) => match start_gateway(&address, model.clone()).await {
            Ok(registry) => Some(registry),
            Err(code) => return code,
        },
    };
    exit_code(
        pincer::acp::serve_stdio(pincer::acp::ServeOptions {
            model,
            registry,
            observed: false,
            gateway_cwd: None,
            max_sessions: None,
        })
        .await,
    )
}

/// Starts `--gateway ADDR`'s gateway on the process's shared sessions;
/// the exit code when it cannot.
async fn start_gateway(
    address: &str,
    model: Option<String>,
) -> Result<std::sync::Arc<pincer::acp::registry::Registry>, i32> {
    let registry = pincer::acp::registry::Registry::new();
    let (bind, port) = parse_address(address).map_err(|e| {
        eprintln!("pincer: {e}");
        2
    })?;
    let options = pincer::gateway::Options {
        bind,
        port,
        model,
        store: None,
        bus: None,
    };
    if let Err(e) = pincer::gateway::start(options, registry.clone()).await {
        eprintln!("pincer: {e}");
        return Err(1);
    }
    Ok(registry)
}

/// `pincer tools`.
async fn tools(
    cwd: Option<std::path::PathBuf>,
    model: Option<String>,
    mode: Option<String>,
    json: bool,
) -> i32 {
    match mode.as_deref().map(|m| (m, pincer::agent::Mode::parse(m))) {
        Some((m, None)) => {
            eprintln!("pincer: unknown mode `{m}`; modes are default, accept-edits, plan, bypass");
            2
        }
        parsed => report(
            pincer::cli::tools::list(cwd, model, parsed.and_then(|(_, mode)| mode), json).await,
        ),
    }
}

/// `pincer workflow …`.
async fn workflow(command: WorkflowCommand) -> i32 {
    match command {
        WorkflowCommand::List => report(pincer::cli::workflow::list()),
        WorkflowCommand::Check => report(pincer::cli::workflow::check()),
        WorkflowCommand::DryRun {
            name,
            outputs,
            inputs,
        } => report(pincer::cli::workflow::dry_run(&name, &inputs, &outputs)),
        WorkflowCommand::Run {
            name,
            inputs,
            common,
        } => {
            pincer::cli::workflow::run(
                pincer::cli::workflow::Start::New { name, inputs },
                common.options(Continue::New),
            )
            .await
        }
        WorkflowCommand::Resume { session, common } => {
            pincer::cli::workflow::run(
                pincer::cli::workflow::Start::Resume,
                common.options(session.map_or(Continue::Latest, Continue::Id)),
            )
            .await
        }
    }
}

/// `pincer login`.
async fn login(
    provider: Option<String>,
    api_key: bool,
    oauth: bool,
    profile: Option<String>,
) -> i32 {
    use pincer::cli::auth::{LoginUsage, Method};
    let method = match (api_key, oauth) {
        (true, _) => Some(Method::ApiKey),
        (_, true) => Some(Method::OAuth),
        _ => None,
    };
    match pincer::cli::auth::login(provider, method, profile).await {
        // Not told enough and cannot ask: a usage error.
        Err(e) if e.is::<LoginUsage>() => {
            eprintln!("pincer: {e}");
            2
        }
        result => report(result),
    }
}

/// `pincer completions SHELL`.
fn completions(shell: pincer::cli::completions::Shell) -> i32 {
    use clap::CommandFactory;
    use std::io::Write;
    let script = pincer::cli::completions::script(shell, &mut Cli::command());
    match std::io::stdout().lock().write_all(&script) {
        Ok(()) => 0,
        // Nobody reads the rest (`| head`): nothing to report.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => 0,
        Err(e) => {
            eprintln!("pincer: cannot write the completion script: {e}");
            1
        }
    }
}

/// `pincer run`'s options from its command line.
fn run_options(command: Command) -> Option<RunOptions> {
    let Command::Run {
        prompt,
        model,
        json,
        output_format,
        mode,
        trust,
        append_system_prompt,
        cwd,
        continue_last,
        resume,
        max_turns,
        allowed_tools,
        disallowed_tools,
        config,
        quiet,
        verbose,
    } = command
    else {
        return None;
    };
    Some(RunOptions {
        prompt,
        model,
        format: if json {
            OutputFormat::StreamJson
        } else {
            output_format
        },
        verbosity: match (quiet, verbose) {
            (true, _) => Verbosity::Quiet,
            (_, true) => Verbosity::Verbose,
            _ => Verbosity::Normal,
        },
        mode,
        trust,
        append_system_prompt,
        cwd,
        session: match (continue_last, resume) {
            (_, Some(id)) => Continue::Id(id),
            (true, None) => Continue::Latest,
            (false, None) => Continue::New,
        },
        max_turns,
        allowed_tools,
        disallowed_tools,
        overrides: config,
    })
}

/// Logs go to stderr only: in `pincer acp`, stdout belongs to the protocol.
fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,agent_client_protocol=error"));
    // The websocket layer traces whole frames, and a client's `connect`
    // carries the gateway's credential: never below info there, whatever
    // RUST_LOG says.
    let filter = ["tungstenite=info", "tokio_tungstenite=info"]
        .iter()
        .filter_map(|d| d.parse().ok())
        .fold(filter, |f, d| f.add_directive(d));
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    tracing_subscriber::registry()
        .with(filter)
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .with_ansi(false),
        )
        // `pincer gateway`'s log file, once it opened one.
        .with(pincer::gateway::logs::Layer)
        .init();
}
