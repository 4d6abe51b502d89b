//! Real PostgreSQL and NATS servers for the tests of the team gateway, where
//! several `pincer gateway` processes share one database and one message
//! bus. Each test starts private servers of its own, listening only on a
//! free loopback port, with their files in a temporary directory; dropping
//! one stops it and removes its files.
//!
//! The servers are the system's: PostgreSQL's `initdb`, `postgres` and
//! `psql` from PATH or Debian's `/usr/lib/postgresql/<version>/bin`, and
//! `nats-server`. When they are missing, Debian's `postgresql` and
//! `nats-server` packages are installed through `.ci/debian-tool`; a test
//! never skips for want of them.
//!
//! PostgreSQL refuses to run as root, and CI runs the tests as root: then
//! `initdb` and the server run as `nobody` (through `setpriv`), which owns
//! the temporary directory. The server is a child of the test, not a
//! daemon (`pg_ctl` would detach it into a session of its own), so it stays
//! in the test's process group, which nextest kills when a test times out.
//!
//! Starting blocks the calling thread (PostgreSQL: about a second, most of
//! it `initdb`; NATS: a few tens of milliseconds): start the servers before
//! what talks to them.
#![allow(dead_code)]

use std::ffi::OsString;
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::acp_client::TIMEOUT;
use super::bridge::free_port;

/// The superuser, and the database the tests use.
const NAME: &str = "pincer";

/// How many free ports a server tries: another process can take the one
/// it was given before the server binds it.
const PORT_ATTEMPTS: usize = 3;

/// How often a start polls for the server's readiness.
const POLL: Duration = Duration::from_millis(10);

/// A private PostgreSQL server on `127.0.0.1:port()` with trust
/// authentication, the superuser `pincer` and an empty database `pincer`.
pub struct Postgres {
    /// The directory of `initdb`, `postgres` and `psql`.
    bin: PathBuf,
    port: u16,
    /// Who runs the server: `None` for the test's own user, the
    /// unprivileged account when the test runs as root.
    account: Option<Account>,
    server: Option<Child>,
    /// Holds `data/` (the cluster), the server's Unix socket and
    /// `postgres.log`.
    dir: tempfile::TempDir,
    /// Started with PostgreSQL's durability, not `fsync=off`.
    durable: bool,
    /// Serving TLS (`server.crt`, `server.key` in its data directory).
    tls: bool,
}

impl Postgres {
    /// Creates a cluster in a new temporary directory and starts its
    /// server on a free loopback port; panics, with the server's log, when
    /// that fails.
    pub fn start() -> Postgres {
        Self::start_with(false, None)
    }

    /// [`Postgres::start`] with TLS: the server presents `ca`'s
    /// certificate for `localhost` and takes connections over TLS only
    /// (`hostssl`; `hostnossl` is rejected). The user `teller` (password
    /// `teller-secret`, SCRAM-SHA-256) owns the database `pincer`; the
    /// superuser keeps trust authentication.
    pub fn start_tls(ca: &super::bridge::TestCa) -> Postgres {
        Self::start_with(false, Some(ca))
    }

    /// [`Postgres::start`], with PostgreSQL's own durability (each commit
    /// flushed to disk, its default shared buffers): for benchmarks of
    /// what the store costs. Tests run with `fsync=off`.
    #[allow(dead_code)]
    pub fn start_durable() -> Postgres {
        Self::start_with(true, None)
    }

    fn start_with(durable: bool, tls: Option<&super::bridge::TestCa>) -> Postgres {
        let bin = ensure_postgres();
        let account = if running_as_root() {
            Some(Account::unprivileged())
        } else {
            None
        };
        let dir = tempfile::Builder::new()
            .prefix("pincer-postgres-")
            .tempdir()
            .unwrap_or_else(|e| panic!("cannot create a temporary directory for PostgreSQL: {e}"));
        if let Some(account) = &account {
            std::os::unix::fs::chown(dir.path(), Some(account.uid), Some(account.gid))
                .unwrap_or_else(|e| {
                    panic!(
                        "cannot give {} to {} for PostgreSQL: {e}",
                        dir.path().display(),
                        account.name
                    )
                });
        }
        let mut postgres = Postgres {
            bin,
            port: 0,
            account,
            server: None,
            dir,
            durable,
            tls: tls.is_some(),
        };
        postgres.initdb();
        if let Some(ca) = tls {
            postgres.serve_tls(ca);
        }
        let mut attempts = 0;
        loop {
            attempts += 1;
            postgres.port = free_port();
            if postgres.launch() {
                break;
            }
            assert!(
                attempts < PORT_ATTEMPTS,
                "PostgreSQL found each of {PORT_ATTEMPTS} free ports taken; its log:\n{}",
                postgres.log()
            );
        }
        postgres.psql_in("postgres", &format!("CREATE DATABASE {NAME}"));
        if tls.is_some() {
            postgres.psql_in(
                "postgres",
                &format!(
                    "SET password_encryption = 'scram-sha-256';
                     CREATE ROLE teller LOGIN PASSWORD 'teller-secret';
                     ALTER DATABASE {NAME} OWNER TO teller"
                ),
            );
        }
        postgres
    }

    /// Puts `ca`'s server certificate and key in the data directory,
    /// owned by the server's account, and lets clients in over TLS only.
    fn serve_tls(&self, ca: &super::bridge::TestCa) {
        use std::os::unix::fs::PermissionsExt;
        let data = self.data();
        for (file, text) in [("server.crt", &ca.cert_pem), ("server.key", &ca.key_pem)] {
            let path = data.join(file);
            std::fs::write(&path, text)
                .unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
                .unwrap_or_else(|e| panic!("cannot restrict {}: {e}", path.display()));
            if let Some(account) = &self.account {
                std::os::unix::fs::chown(&path, Some(account.uid), Some(account.gid))
                    .unwrap_or_else(|e| panic!("cannot give {} away: {e}", path.display()));
            }
        }
        let hba = data.join("pg_hba.conf");
        let rules = format!(
            "local all all trust\n\
             hostssl all teller 127.0.0.1/32 scram-sha-256\n\
             hostssl all {NAME} 127.0.0.1/32 trust\n\
             hostnossl all all 0.0.0.0/0 reject\n"
        );
        std::fs::write(&hba, rules)
            .unwrap_or_else(|e| panic!("cannot write {}: {e}", hba.display()));
    }

    /// The connection URL of the database `pincer`, as user `pincer`.
    pub fn url(&self) -> String {
        self.url_of(NAME)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The directory holding the server's programs (`psql`, `pg_dump`, …).
    pub fn bin(&self) -> &Path {
        &self.bin
    }

    /// Runs `sql` in the database `pincer` with `psql` and returns what it
    /// printed, unaligned and without headers (`a|b` per row), trimmed;
    /// panics when it fails.
    pub fn psql(&self, sql: &str) -> String {
        self.try_psql(sql)
            .unwrap_or_else(|e| panic!("psql on port {}: {sql}: {e}", self.port))
    }

    /// [`Postgres::psql`], with its error output instead of a panic when it
    /// fails (for instance while the server is stopped).
    pub fn try_psql(&self, sql: &str) -> Result<String, String> {
        run_psql(&self.bin, &self.url(), sql)
    }

    /// Stops the server at once, as a crash would (PostgreSQL's immediate
    /// shutdown): sessions are cut, committed transactions stay. Nothing
    /// happens when it is not running.
    pub fn stop(&mut self) {
        let Some(mut server) = self.server.take() else {
            return;
        };
        // SIGQUIT: the postmaster takes its backends down with it. (A
        // SIGKILL would leave them holding the shared memory, and the next
        // start would refuse it.)
        let quit = Command::new("kill")
            .args(["-QUIT", &server.id().to_string()])
            .stdin(Stdio::null())
            .output();
        if !quit.is_ok_and(|output| output.status.success()) {
            let _ = server.kill();
        }
        let _ = server.wait();
    }

    /// Starts the server again on the same port with the same data,
    /// stopping it first when it runs (PostgreSQL recovers from the
    /// immediate stop as from a crash).
    pub fn start_again(&mut self) {
        self.stop();
        assert!(
            self.launch(),
            "PostgreSQL cannot listen on port {} again: another process took it; its log:\n{}",
            self.port,
            self.log()
        );
    }

    /// A `psql` on the database that stays open until it is killed (or
    /// its stdin closed), running what is written to its stdin: for a
    /// test to hold a transaction, and its locks, while pincer works.
    pub fn open_psql(&self) -> Child {
        let mut command = Command::new(self.bin.join("psql"));
        without_pg_env(&mut command);
        command
            .env("LC_ALL", "C")
            .args(["-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", &self.url()])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {}/psql: {e}", self.bin.display()))
    }

    /// The database `pincer` over the server's Unix socket.
    pub fn socket_url(&self) -> String {
        let dir = self.dir.path().display().to_string().replace('/', "%2F");
        format!("postgres://{NAME}@{dir}:{}/{NAME}", self.port)
    }

    fn url_of(&self, database: &str) -> String {
        format!("postgres://{NAME}@127.0.0.1:{}/{database}", self.port)
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn log(&self) -> String {
        read_log(&self.dir.path().join("postgres.log"))
    }

    /// A command running `program` from the server's directory as the
    /// server's account.
    fn as_server(&self, program: &str) -> Command {
        let program = self.bin.join(program);
        let mut command = match &self.account {
            Some(account) => {
                let mut command = Command::new("setpriv");
                command
                    .arg(format!("--reuid={}", account.uid))
                    .arg(format!("--regid={}", account.gid))
                    .arg("--clear-groups")
                    .arg("--")
                    .arg(program);
                command
            }
            None => Command::new(program),
        };
        without_pg_env(&mut command);
        command.stdin(Stdio::null());
        command
    }

    /// `initdb` without the locale's trouble (C collation, UTF-8) and
    /// without syncing files a test throws away.
    fn initdb(&self) {
        let output = self
            .as_server("initdb")
            .arg("-D")
            .arg(self.data())
            .args(["--auth=trust", "--username", NAME])
            .args(["--encoding=UTF8", "--no-locale", "--no-sync"])
            .output()
            .unwrap_or_else(|e| panic!("cannot run {}/initdb: {e}", self.bin.display()));
        assert!(
            output.status.success(),
            "{}/initdb -D {} failed ({}){}:\n{}{}",
            self.bin.display(),
            self.data().display(),
            output.status,
            self.account
                .as_ref()
                .map(|a| format!(" as {}", a.name))
                .unwrap_or_default(),
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }

    /// Starts the server on `self.port` and waits until it accepts
    /// connections. Returns false when the port was taken (the server has
    /// exited then); panics on any other failure.
    fn launch(&mut self) -> bool {
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join("postgres.log"))
            .unwrap_or_else(|e| panic!("cannot open PostgreSQL's log: {e}"));
        let start_of_log = log_length(&log);
        let server = self
            .as_server("postgres")
            .arg("-D")
            .arg(self.data())
            .arg("-p")
            .arg(self.port.to_string())
            .arg("-c")
            .arg("listen_addresses=127.0.0.1")
            .arg("-c")
            .arg(format!(
                "unix_socket_directories={}",
                self.dir.path().display()
            ))
            .args(if self.durable {
                &[][..]
            } else {
                &["-c", "fsync=off", "-c", "shared_buffers=16MB"][..]
            })
            .args(if self.tls {
                &["-c", "ssl=on"][..]
            } else {
                &[][..]
            })
            .stdout(clone(&log))
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}/postgres: {e}", self.bin.display()));
        let pid = server.id();
        self.server = Some(server);
        let data = self.data();
        let log = self.dir.path().join("postgres.log");
        wait_started(
            "PostgreSQL",
            self.port,
            &mut self.server,
            &log,
            start_of_log,
            || postmaster_ready(&data, pid),
        )
    }

    fn psql_in(&self, database: &str, sql: &str) -> String {
        run_psql(&self.bin, &self.url_of(database), sql)
            .unwrap_or_else(|e| panic!("psql on port {}: {sql}: {e}", self.port))
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A private NATS server on `127.0.0.1:port()`, without authentication,
/// monitoring or JetStream.
pub struct Nats {
    program: PathBuf,
    port: u16,
    server: Option<Child>,
    /// Holds `nats.log` (and, with TLS, `server.crt` and `server.key`).
    dir: tempfile::TempDir,
    /// Requiring TLS of its clients.
    tls: bool,
}

impl Nats {
    /// Starts a server on a free loopback port and waits until it greets
    /// a client with its `INFO` line; panics, with its log, when that
    /// fails.
    pub fn start() -> Nats {
        Self::start_with(None)
    }

    /// [`Nats::start`], requiring TLS of every client: the server
    /// presents `ca`'s certificate for `localhost`.
    pub fn start_tls(ca: &super::bridge::TestCa) -> Nats {
        Self::start_with(Some(ca))
    }

    fn start_with(tls: Option<&super::bridge::TestCa>) -> Nats {
        let program = ensure_nats();
        let dir = tempfile::Builder::new()
            .prefix("pincer-nats-")
            .tempdir()
            .unwrap_or_else(|e| panic!("cannot create a temporary directory for NATS: {e}"));
        if let Some(ca) = tls {
            for (file, text) in [("server.crt", &ca.cert_pem), ("server.key", &ca.key_pem)] {
                std::fs::write(dir.path().join(file), text)
                    .unwrap_or_else(|e| panic!("cannot write NATS's {file}: {e}"));
            }
        }
        let mut nats = Nats {
            program,
            port: 0,
            server: None,
            dir,
            tls: tls.is_some(),
        };
        let mut attempts = 0;
        loop {
            attempts += 1;
            nats.port = free_port();
            if nats.launch() {
                break;
            }
            assert!(
                attempts < PORT_ATTEMPTS,
                "nats-server found each of {PORT_ATTEMPTS} free ports taken; its log:\n{}",
                nats.log()
            );
        }
        nats
    }

    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// Kills the server (SIGKILL: clients see their connections drop, as
    /// in a crash). Nothing happens when it is not running.
    pub fn stop(&mut self) {
        if let Some(mut server) = self.server.take() {
            let _ = server.kill();
            let _ = server.wait();
        }
    }

    /// Starts the server again on the same port, killing it first when it
    /// runs.
    pub fn restart(&mut self) {
        self.stop();
        assert!(
            self.launch(),
            "nats-server cannot listen on port {} again: another process took it; its log:\n{}",
            self.port,
            self.log()
        );
    }

    fn log(&self) -> String {
        read_log(&self.dir.path().join("nats.log"))
    }

    /// Starts the server on `self.port` and waits for its `INFO` line.
    /// Returns false when the port was taken (the server has exited then);
    /// panics on any other failure.
    fn launch(&mut self) -> bool {
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join("nats.log"))
            .unwrap_or_else(|e| panic!("cannot open nats-server's log: {e}"));
        let start_of_log = log_length(&log);
        let mut command = Command::new(&self.program);
        command.args(["-a", "127.0.0.1", "-p", &self.port.to_string()]);
        if self.tls {
            command
                .arg("--tls")
                .arg("--tlscert")
                .arg(self.dir.path().join("server.crt"))
                .arg("--tlskey")
                .arg(self.dir.path().join("server.key"));
        }
        let server = command
            .stdin(Stdio::null())
            .stdout(clone(&log))
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", self.program.display()));
        self.server = Some(server);
        let port = self.port;
        wait_started(
            "nats-server",
            port,
            &mut self.server,
            &self.dir.path().join("nats.log"),
            start_of_log,
            || greets(port),
        )
    }
}

impl Drop for Nats {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Whether a NATS server on `port` accepts a connection and sends its
/// `INFO {…}` line.
fn greets(port: u16) -> bool {
    let Ok(stream) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    if stream.set_read_timeout(Some(TIMEOUT)).is_err() {
        return false;
    }
    let mut line = String::new();
    BufReader::new(stream).read_line(&mut line).is_ok() && line.starts_with("INFO {")
}

/// The system account a server runs as when the tests run as root:
/// `nobody`, or `pincer-test` (created) where there is no `nobody`.
#[derive(Clone, Debug)]
struct Account {
    name: String,
    uid: u32,
    gid: u32,
}

impl Account {
    fn unprivileged() -> Account {
        if let Some(account) = Account::lookup("nobody") {
            return account;
        }
        // Another test may create it at the same moment: `useradd` then
        // fails, and the lookup below finds the account all the same.
        let created = Command::new("useradd")
            .args([
                "--system",
                "--no-create-home",
                "--shell",
                "/usr/sbin/nologin",
            ])
            .arg("pincer-test")
            .stdin(Stdio::null())
            .output();
        Account::lookup("pincer-test").unwrap_or_else(|| {
            panic!(
                "PostgreSQL refuses to run as root, and there is neither a `nobody` account \
                 to run it as nor a way to create `pincer-test` (useradd: {created:?}); \
                 run the tests as another user"
            )
        })
    }

    /// `name`'s uid and primary gid, from `getent passwd`.
    fn lookup(name: &str) -> Option<Account> {
        let output = Command::new("getent")
            .args(["passwd", name])
            .stdin(Stdio::null())
            .output()
            .ok()?;
        if !output.status.success() {
            return None;
        }
        let entry = String::from_utf8(output.stdout).ok()?;
        // name:password:uid:gid:…
        let mut fields = entry.trim().split(':');
        Some(Account {
            name: name.to_string(),
            uid: fields.nth(2)?.parse().ok()?,
            gid: fields.next()?.parse().ok()?,
        })
    }
}

fn running_as_root() -> bool {
    let output = Command::new("id")
        .arg("-u")
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run `id -u`: {e}"));
    String::from_utf8_lossy(&output.stdout).trim() == "0"
}

/// PostgreSQL's program directory, installing Debian's `postgresql` when
/// there is none.
fn ensure_postgres() -> PathBuf {
    if let Some(bin) = postgres_bin() {
        return bin;
    }
    // Debian keeps initdb off PATH; `pg_ctlcluster` (postgresql-common,
    // which only the server packages pull in) stands for the package.
    debian_tool("pg_ctlcluster", "postgresql");
    postgres_bin().unwrap_or_else(|| {
        panic!(
            "PostgreSQL's server programs (initdb, postgres, psql) are neither on PATH nor in \
             /usr/lib/postgresql/<version>/bin; install Debian's postgresql package (or your \
             system's PostgreSQL server)"
        )
    })
}

/// The directory holding `initdb`, `postgres` and `psql` together: the
/// one `initdb` on PATH resolves to, else Debian's newest version.
fn postgres_bin() -> Option<PathBuf> {
    let complete = |dir: &Path| {
        ["initdb", "postgres", "psql"]
            .iter()
            .all(|program| dir.join(program).is_file())
    };
    let on_path = std::env::var_os("PATH")
        .map(|path| std::env::split_paths(&path).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .filter_map(|dir| dir.join("initdb").canonicalize().ok())
        .filter_map(|initdb| initdb.parent().map(Path::to_path_buf))
        .find(|dir| complete(dir));
    if on_path.is_some() {
        return on_path;
    }
    let mut debian: Vec<(Vec<u32>, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let version = entry
                .file_name()
                .to_str()?
                .split('.')
                .map(|part| part.parse().ok())
                .collect::<Option<Vec<u32>>>()?;
            Some((version, entry.path().join("bin")))
        })
        .filter(|(_, bin)| complete(bin))
        .collect();
    debian.sort();
    debian.pop().map(|(_, bin)| bin)
}

/// `nats-server`, installing Debian's package when it is missing.
fn ensure_nats() -> PathBuf {
    if let Some(program) = nats_program() {
        return program;
    }
    debian_tool("nats-server", "nats-server");
    nats_program().unwrap_or_else(|| {
        panic!("nats-server is neither on PATH nor in /usr/sbin; install Debian's nats-server")
    })
}

/// `nats-server` on PATH, or in /usr/sbin where Debian puts it (and which
/// is not on an ordinary user's PATH).
fn nats_program() -> Option<PathBuf> {
    std::env::split_paths(&search_path())
        .map(|dir| dir.join("nats-server"))
        .find(|program| program.is_file())
}

/// PATH with the system directories after it.
fn search_path() -> OsString {
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|path| std::env::split_paths(&path).collect())
        .unwrap_or_default();
    dirs.extend(["/usr/sbin", "/sbin"].map(PathBuf::from));
    std::env::join_paths(dirs).unwrap_or_default()
}

/// Installs Debian's `package` through `.ci/debian-tool` when `program` is
/// not on PATH (with the system directories: Debian puts servers in
/// /usr/sbin); fails, never skips, when that cannot be done.
fn debian_tool(program: &str, package: &str) {
    super::ensure_tool_on(program, package, &search_path());
}

/// Runs `sql` through `psql` at `url` as the test's own user (any user
/// may connect: authentication is `trust`); the error is psql's message.
fn run_psql(bin: &Path, url: &str, sql: &str) -> Result<String, String> {
    let mut command = Command::new(bin.join("psql"));
    without_pg_env(&mut command);
    // Messages in English whatever the developer's locale (tests read
    // them), results in UTF-8.
    command.env("LC_ALL", "C").env("PGCLIENTENCODING", "UTF8");
    // -X: no ~/.psqlrc; ON_ERROR_STOP: a failing statement fails psql.
    let output = command
        .args([
            "-X",
            "-q",
            "-t",
            "-A",
            "-v",
            "ON_ERROR_STOP=1",
            "-d",
            url,
            "-c",
            sql,
        ])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {}/psql: {e}", bin.display()))?;
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).trim().to_string())
    } else {
        Err(format!(
            "psql failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        ))
    }
}

/// Removes libpq's and the server's `PG*` variables (PGHOST, PGOPTIONS,
/// PGDATA, …) from `command`'s environment: the developer's settings are
/// not the test's.
fn without_pg_env(command: &mut Command) {
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("PG") {
            command.env_remove(key);
        }
    }
}

/// Waits until a server just started (`server`, writing `log` from
/// `start_of_log` on) is `ready`: true then, false when it exited because
/// its port was taken (another process took the free port first); panics,
/// with its log, when it exited otherwise or was not ready in time.
fn wait_started(
    what: &str,
    port: u16,
    server: &mut Option<Child>,
    log: &Path,
    start_of_log: usize,
    ready: impl Fn() -> bool,
) -> bool {
    let deadline = Instant::now() + TIMEOUT;
    loop {
        if ready() {
            return true;
        }
        if let Some(status) = server.as_mut().and_then(|s| s.try_wait().ok().flatten()) {
            *server = None;
            let text = read_log(log);
            if port_taken(text.get(start_of_log..).unwrap_or_default()) {
                return false;
            }
            panic!("{what} on port {port} exited while starting ({status}); its log:\n{text}");
        }
        if Instant::now() > deadline {
            if let Some(mut child) = server.take() {
                let _ = child.kill();
                let _ = child.wait();
            }
            panic!(
                "{what} on port {port} was not ready after {TIMEOUT:?}; its log:\n{}",
                read_log(log)
            );
        }
        std::thread::sleep(POLL);
    }
}

/// Whether the PostgreSQL server `pid` says it accepts connections: the
/// status line (the eighth) of `postmaster.pid` in `data`, which `pg_ctl
/// -w` waits on too. The pid tells this start's file from one a stopped
/// server left behind.
fn postmaster_ready(data: &Path, pid: u32) -> bool {
    let Ok(lock) = std::fs::read_to_string(data.join("postmaster.pid")) else {
        return false;
    };
    let lines: Vec<&str> = lock.lines().map(str::trim).collect();
    lines.first() == Some(&pid.to_string().as_str()) && lines.get(7) == Some(&"ready")
}

/// Whether a server's log says its port was taken (PostgreSQL: "could not
/// bind IPv4 address … Address already in use"; nats-server: "bind:
/// address already in use").
fn port_taken(log: &str) -> bool {
    log.to_lowercase().contains("address already in use")
}

fn read_log(path: &Path) -> String {
    std::fs::read(path)
        .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
        .unwrap_or_default()
}

/// How long a log already is: where the next start's lines begin.
fn log_length(log: &File) -> usize {
    log.metadata()
        .map(|m| usize::try_from(m.len()).unwrap_or(usize::MAX))
        .unwrap_or(0)
}

fn clone(file: &File) -> File {
    file.try_clone()
        .unwrap_or_else(|e| panic!("cannot share a server's log file: {e}"))
}
