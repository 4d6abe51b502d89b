//! The sandbox on Linux: `pincer sandbox exec --policy JSON -- PROGRAM
//! ARGS…` confines its own process and then becomes the program, so the
//! confinement holds for the program and everything it starts (a pipeline,
//! a `nohup` or `setsid` process left running), and pincer, which started
//! it, stays unconfined.
//!
//! In order, while the launcher is still the only thread:
//! 1. a user namespace (the user stays who they are: their uid and gid
//!    map to themselves), a mount namespace, and with `network =
//!    "loopback"` a network namespace whose loopback is brought up;
//! 2. in the mount namespace, each secret is covered: a directory by an
//!    empty read-only tmpfs whose root nobody may enter, a file or socket
//!    by an empty file nobody may read; each protected path (`.git/hooks`,
//!    `.git/config`, `.pincer/`) is bound read-only over itself, and
//!    `.git` over itself, so neither can be renamed away and replaced;
//! 3. the capabilities the namespace gave are dropped from the bounding,
//!    inheritable and ambient sets, so the program holds none (not even a
//!    root user: it could otherwise read past the covers);
//! 4. resource limits (processes, file size, CPU time); the user
//!    namespace makes the process limit count only this command's
//!    processes;
//! 5. Landlock: everything may be read and run, and written only beneath
//!    the writable places and a few devices; abstract Unix sockets and
//!    signals outside the sandbox are out of reach (ABI 6);
//! 6. seccomp: sockets of families the network setting does not allow,
//!    io_uring (which would bypass that check), mounts, BPF and the
//!    kernel keyrings fail with `EPERM`.
//!
//! Any step that fails ends the launcher with [`super::SETUP_FAILED`] and
//! a line saying why, before the program ever runs: a command is never run
//! less confined than its policy says.
//!
//! The kernel does not apply the process limit to the real root user
//! (`RLIMIT_NPROC` exempts uid 0); everything else holds for root too.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};

use landlock::{
    ABI, Access, AccessFs, PathBeneath, PathFd, Ruleset, RulesetAttr, RulesetCreatedAttr,
    RulesetStatus, Scope,
};
use nix::mount::{MsFlags, mount};
use nix::sched::{CloneFlags, unshare};
use nix::sys::resource::{Resource, getrlimit, setrlimit};
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

use super::{Network, Policy, SETUP_FAILED, SETUP_FAILED_PREFIX};

/// Devices every command may open for writing: the terminal, the null and
/// random devices, shared memory.
const DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
    "/dev/ptmx",
    "/dev/pts",
    "/dev/shm",
];

/// `pincer sandbox exec` with `args` (what follows `exec`): confines this
/// process as `--policy` says and becomes the program after `--`; with
/// `--probe` instead of a program, exits 0 once confined. Returns the exit
/// code when it cannot.
pub fn exec_main(args: Vec<OsString>) -> i32 {
    if args.first().is_some_and(|a| a == "--hold-network") {
        let forward = match args.get(1).and_then(|a| a.to_str()) {
            Some("--forward") => args.get(2).map(PathBuf::from),
            _ => None,
        };
        return hold_network(forward);
    }
    if args.first().is_some_and(|a| a == "--proxy") {
        return proxy_main(&args[1..]);
    }
    let mut policy = None;
    let mut probe = false;
    let mut rest = args.into_iter();
    let mut program = Vec::new();
    while let Some(arg) = rest.next() {
        match arg.to_str() {
            Some("--policy") => policy = rest.next(),
            Some("--probe") => probe = true,
            Some("--") => {
                program.extend(rest.by_ref());
                break;
            }
            _ => {
                eprintln!(
                    "{SETUP_FAILED_PREFIX}unexpected argument {arg:?}; usage: pincer sandbox exec --policy JSON -- PROGRAM [ARGS]"
                );
                return SETUP_FAILED;
            }
        }
    }
    let Some(policy) = policy else {
        eprintln!("{SETUP_FAILED_PREFIX}--policy is required");
        return SETUP_FAILED;
    };
    let policy: Policy = match serde_json::from_str(&policy.to_string_lossy()) {
        Ok(policy) => policy,
        Err(e) => {
            eprintln!("{SETUP_FAILED_PREFIX}the policy is not valid: {e}");
            return SETUP_FAILED;
        }
    };
    if let Err(why) = confine(&policy) {
        eprintln!("{SETUP_FAILED_PREFIX}{why}");
        return SETUP_FAILED;
    }
    if probe {
        return 0;
    }
    let mut program = program.into_iter();
    let Some(name) = program.next() else {
        eprintln!("{SETUP_FAILED_PREFIX}no program to run after --");
        return SETUP_FAILED;
    };
    let mut command = std::process::Command::new(&name);
    command.args(program);
    if let Some(port) = policy.proxy {
        command.envs(super::proxy::variables(port));
    }
    let error = command.exec();
    eprintln!("{}: {error}", Path::new(&name).display());
    if error.kind() == std::io::ErrorKind::NotFound {
        127
    } else {
        126
    }
}

/// Confines this process (which must have one thread) to `policy`.
pub fn confine(policy: &Policy) -> Result<(), String> {
    let mut flags = CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWNS;
    let shared = match (policy.network, policy.shared_network) {
        (Network::Loopback, Some(shared)) => {
            join(&shared)?;
            true
        }
        (Network::Loopback, None) => {
            flags |= CloneFlags::CLONE_NEWNET;
            false
        }
        _ => false,
    };
    let uid = nix::unistd::getuid();
    let gid = nix::unistd::getgid();
    unshare(flags).map_err(|e| {
        format!(
            "cannot create a user namespace ({e}): this system does not allow unprivileged \
             user namespaces (see `pincer sandbox check`)"
        )
    })?;
    std::fs::write("/proc/self/setgroups", "deny")
        .and_then(|()| std::fs::write("/proc/self/uid_map", format!("{uid} {uid} 1")))
        .and_then(|()| std::fs::write("/proc/self/gid_map", format!("{gid} {gid} 1")))
        .map_err(|e| format!("cannot map the user into its namespace: {e}"))?;
    if policy.network == Network::Loopback && !shared {
        loopback_up().map_err(|e| format!("cannot bring up the sandbox's loopback: {e}"))?;
    }
    mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_PRIVATE,
        None::<&str>,
    )
    .map_err(|e| format!("cannot make the mounts private: {e}"))?;
    protect(policy)?;
    cover(&policy.deny_read)?;
    for set in [
        caps::CapSet::Ambient,
        caps::CapSet::Inheritable,
        caps::CapSet::Bounding,
    ] {
        caps::clear(None, set).map_err(|e| format!("cannot drop capabilities: {e}"))?;
    }
    limit(policy)?;
    landlock(policy)?;
    seccomp(policy.network)?;
    Ok(())
}

/// The inode of one of this process's namespaces (`user`, `net`).
fn namespace_of(pid: &str, kind: &str) -> std::io::Result<u64> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(format!("/proc/{pid}/ns/{kind}")).map(|m| m.ino())
}

/// `pincer-sandbox --proxy SOCKET --allow JSON`: the proxy of
/// `allow_hosts` (`super::proxy`), on the machine's network, listening on
/// the Unix socket `SOCKET` (made afresh, for its owner only). It says
/// `ready` on stderr once it listens, and ends, removing the socket, when
/// its stdin closes (pincer is gone).
fn proxy_main(args: &[OsString]) -> i32 {
    let fail = |why: String| {
        eprintln!("{SETUP_FAILED_PREFIX}{why}");
        SETUP_FAILED
    };
    let (Some(socket), Some(flag), Some(allow)) = (args.first(), args.get(1), args.get(2)) else {
        return fail("usage: --proxy SOCKET --allow JSON".to_string());
    };
    if flag != "--allow" {
        return fail("usage: --proxy SOCKET --allow JSON".to_string());
    }
    let patterns: Vec<String> = match serde_json::from_str::<Vec<String>>(&allow.to_string_lossy())
    {
        Ok(list) => match list.iter().map(|e| super::proxy::pattern(e)).collect() {
            Ok(patterns) => patterns,
            Err(why) => return fail(why),
        },
        Err(e) => return fail(format!("the allow list is not valid: {e}")),
    };
    let socket = PathBuf::from(socket);
    let _ = std::fs::remove_file(&socket);
    let listener = match std::os::unix::net::UnixListener::bind(&socket) {
        Ok(listener) => listener,
        Err(e) => return fail(format!("cannot listen on {}: {e}", socket.display())),
    };
    {
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o600));
    }
    let ended = socket.clone();
    let watch = std::thread::Builder::new()
        .stack_size(64 * 1024)
        .spawn(move || {
            let mut byte = [0u8; 64];
            loop {
                use std::io::Read;
                match std::io::stdin().read(&mut byte) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
            }
            let _ = std::fs::remove_file(&ended);
            std::process::exit(0);
        });
    if let Err(e) = watch {
        return fail(format!("cannot watch for pincer's end: {e}"));
    }
    eprintln!("ready");
    // The machine's own proxy, if pincer has one, is this one's way out.
    let upstream = super::proxy::Upstream::from_env(|name| std::env::var(name).ok());
    super::proxy::serve(listener, super::proxy::Rules { patterns, upstream });
    0
}

/// `pincer-sandbox --hold-network [--forward SOCKET]`: makes a user and a
/// network namespace with its loopback up and holds them until its stdin
/// closes (pincer, which started it, is gone). It says their inodes on
/// stderr (a pipe to pincer); with `--forward`, also the port of its
/// loopback whose connections it carries to the proxy at `SOCKET`.
fn hold_network(forward: Option<PathBuf>) -> i32 {
    let made = (|| -> Result<(u64, u64), String> {
        let uid = nix::unistd::getuid();
        let gid = nix::unistd::getgid();
        unshare(CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWNET)
            .map_err(|e| format!("cannot create the namespaces: {e}"))?;
        std::fs::write("/proc/self/setgroups", "deny")
            .and_then(|()| std::fs::write("/proc/self/uid_map", format!("{uid} {uid} 1")))
            .and_then(|()| std::fs::write("/proc/self/gid_map", format!("{gid} {gid} 1")))
            .map_err(|e| format!("cannot map the user into its namespace: {e}"))?;
        loopback_up().map_err(|e| format!("cannot bring up the loopback: {e}"))?;
        let user = namespace_of("self", "user").map_err(|e| e.to_string())?;
        let net = namespace_of("self", "net").map_err(|e| e.to_string())?;
        Ok((user, net))
    })();
    let (user, net) = match made {
        Ok(inodes) => inodes,
        Err(why) => {
            eprintln!("{SETUP_FAILED_PREFIX}{why}");
            return SETUP_FAILED;
        }
    };
    match forward {
        None => eprintln!("{user} {net}"),
        Some(proxy) => {
            // Bound after the namespaces were made: this loopback is the
            // sandbox's.
            let listener = match std::net::TcpListener::bind("127.0.0.1:0") {
                Ok(listener) => listener,
                Err(e) => {
                    eprintln!("{SETUP_FAILED_PREFIX}cannot listen for the proxy: {e}");
                    return SETUP_FAILED;
                }
            };
            let port = listener.local_addr().map(|a| a.port()).unwrap_or_default();
            let carrying = std::thread::Builder::new()
                .stack_size(64 * 1024)
                .spawn(move || super::proxy::forward(listener, proxy));
            if let Err(e) = carrying {
                eprintln!("{SETUP_FAILED_PREFIX}cannot forward to the proxy: {e}");
                return SETUP_FAILED;
            }
            eprintln!("{user} {net} {port}");
        }
    }
    let mut byte = [0u8; 64];
    loop {
        use std::io::Read;
        match std::io::stdin().read(&mut byte) {
            Ok(0) | Err(_) => return 0,
            Ok(_) => {}
        }
    }
}

/// Joins the held user and network namespaces of `shared`, after checking
/// that its pid still names them (and again after).
fn join(shared: &super::SharedNetwork) -> Result<(), String> {
    let pid = shared.pid.to_string();
    let fail = |e: &dyn std::fmt::Display| format!("cannot join the sandbox's network: {e}");
    let user = std::fs::File::open(format!("/proc/{pid}/ns/user")).map_err(|e| fail(&e))?;
    let net = std::fs::File::open(format!("/proc/{pid}/ns/net")).map_err(|e| fail(&e))?;
    use std::os::unix::fs::MetadataExt;
    let inode = |file: &std::fs::File| file.metadata().map(|m| m.ino()).unwrap_or_default();
    if inode(&user) != shared.user || inode(&net) != shared.net {
        return Err(fail(&"its holder is gone"));
    }
    nix::sched::setns(&user, CloneFlags::CLONE_NEWUSER).map_err(|e| fail(&e))?;
    nix::sched::setns(&net, CloneFlags::CLONE_NEWNET).map_err(|e| fail(&e))?;
    if namespace_of("self", "net").ok() != Some(shared.net) {
        return Err(fail(&"the namespace joined is not the one held"));
    }
    Ok(())
}

/// Binds each existing protected path read-only over itself, and the
/// directories between it and its writable place (`.git`) over themselves:
/// a mount point cannot be renamed or removed.
fn protect(policy: &Policy) -> Result<(), String> {
    let mut pinned: Vec<PathBuf> = Vec::new();
    for path in &policy.read_only {
        // What is not there (a dangling link included: a repository can
        // commit one) has nothing to protect, and a failed bind would stop
        // every command.
        if std::fs::metadata(path).is_err() {
            continue;
        }
        if let Some(root) = policy.writable.iter().find(|w| path.starts_with(w)) {
            let mut between = path.parent();
            let mut chain = Vec::new();
            while let Some(dir) = between {
                if dir == root.as_path() || !dir.starts_with(root) {
                    break;
                }
                chain.push(dir.to_path_buf());
                between = dir.parent();
            }
            for dir in chain.into_iter().rev() {
                if !pinned.contains(&dir) {
                    bind(&dir, &dir, false)?;
                    pinned.push(dir);
                }
            }
        }
        bind(path, path, true)?;
    }
    Ok(())
}

/// Bind-mounts `source` on `target`, read-only if asked. A read-only
/// remount keeps the flags the kernel locked on the mount beneath
/// (`nosuid`, `nodev`, …), which a user namespace may not clear.
fn bind(source: &Path, target: &Path, read_only: bool) -> Result<(), String> {
    mount(
        Some(source),
        target,
        None::<&str>,
        MsFlags::MS_BIND | MsFlags::MS_REC,
        None::<&str>,
    )
    .map_err(|e| format!("cannot bind {}: {e}", target.display()))?;
    if read_only {
        let locked = nix::sys::statvfs::statvfs(target)
            .map(|s| mount_flags(s.flags()))
            .unwrap_or_else(|_| MsFlags::empty());
        mount(
            None::<&str>,
            target,
            None::<&str>,
            MsFlags::MS_BIND | MsFlags::MS_REMOUNT | MsFlags::MS_RDONLY | locked,
            None::<&str>,
        )
        .map_err(|e| format!("cannot make {} read-only: {e}", target.display()))?;
    }
    Ok(())
}

fn mount_flags(flags: nix::sys::statvfs::FsFlags) -> MsFlags {
    use nix::sys::statvfs::FsFlags;
    let mut out = MsFlags::empty();
    for (from, to) in [
        (FsFlags::ST_NOSUID, MsFlags::MS_NOSUID),
        (FsFlags::ST_NODEV, MsFlags::MS_NODEV),
        (FsFlags::ST_NOEXEC, MsFlags::MS_NOEXEC),
        (FsFlags::ST_NOATIME, MsFlags::MS_NOATIME),
        (FsFlags::ST_NODIRATIME, MsFlags::MS_NODIRATIME),
        (FsFlags::ST_RELATIME, MsFlags::MS_RELATIME),
    ] {
        if flags.contains(from) {
            out |= to;
        }
    }
    out
}

/// Covers each existing path of `deny`, parents first: a directory with an
/// empty read-only tmpfs that nobody may enter, anything else with an
/// empty file nobody may read.
fn cover(deny: &[PathBuf]) -> Result<(), String> {
    let mut deny: Vec<&PathBuf> = deny.iter().collect();
    deny.sort_by_key(|p| p.components().count());
    let mut blank: Option<std::os::fd::OwnedFd> = None;
    for path in deny {
        let Ok(meta) = std::fs::symlink_metadata(path) else {
            continue;
        };
        if meta.is_dir() {
            mount(
                Some("none"),
                path.as_path(),
                Some("tmpfs"),
                MsFlags::MS_RDONLY | MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
                Some("mode=000,size=4k,nr_inodes=1"),
            )
            .map_err(|e| format!("cannot hide {}: {e}", path.display()))?;
        } else {
            if blank.is_none() {
                let fd = nix::sys::memfd::memfd_create(
                    c"pincer-denied",
                    nix::sys::memfd::MFdFlags::MFD_CLOEXEC,
                )
                .map_err(|e| format!("cannot make the file that hides secrets: {e}"))?;
                nix::sys::stat::fchmod(&fd, nix::sys::stat::Mode::empty())
                    .map_err(|e| format!("cannot make the file that hides secrets: {e}"))?;
                blank = Some(fd);
            }
            let source = PathBuf::from(format!(
                "/proc/self/fd/{}",
                blank.as_ref().map_or(-1, |fd| fd.as_raw_fd())
            ));
            bind(&source, path, true)?;
        }
    }
    Ok(())
}

/// Sets each limit as both soft and hard (never above the hard limit
/// already in place).
fn limit(policy: &Policy) -> Result<(), String> {
    for (resource, value, name) in [
        (
            Resource::RLIMIT_NPROC,
            policy.limits.processes,
            "the process limit",
        ),
        (
            Resource::RLIMIT_FSIZE,
            policy.limits.file_size,
            "the file size limit",
        ),
        (
            Resource::RLIMIT_CPU,
            policy.limits.cpu_seconds,
            "the CPU time limit",
        ),
    ] {
        let (_, hard) = getrlimit(resource).map_err(|e| format!("cannot read {name}: {e}"))?;
        let value = value.min(hard);
        setrlimit(resource, value, value).map_err(|e| format!("cannot set {name}: {e}"))?;
    }
    Ok(())
}

/// Landlock: read and run everything; write beneath the writable places
/// and the devices; no abstract Unix sockets or signals beyond the
/// sandbox.
fn landlock(policy: &Policy) -> Result<(), String> {
    let abi = ABI::V6;
    let fail = |e: landlock::RulesetError| format!("cannot set up Landlock: {e}");
    let mut ruleset = Ruleset::default()
        .handle_access(AccessFs::from_all(abi))
        .map_err(fail)?
        .scope(Scope::AbstractUnixSocket | Scope::Signal)
        .map_err(fail)?
        .create()
        .map_err(fail)?;
    let root = PathFd::new("/").map_err(|e| format!("cannot open /: {e}"))?;
    ruleset = ruleset
        .add_rule(PathBeneath::new(root, AccessFs::from_read(abi)))
        .map_err(fail)?;
    let writable = policy
        .writable
        .iter()
        .map(PathBuf::as_path)
        .chain(DEVICES.iter().map(Path::new));
    for path in writable {
        // A place that does not exist cannot be written beneath.
        let Ok(fd) = PathFd::new(path) else { continue };
        ruleset = ruleset
            .add_rule(PathBeneath::new(fd, AccessFs::from_all(abi)))
            .map_err(fail)?;
    }
    let status = ruleset.restrict_self().map_err(fail)?;
    if status.ruleset == RulesetStatus::NotEnforced {
        return Err(format!(
            "this kernel does not enforce Landlock ({:?}); commands cannot be confined",
            status.landlock
        ));
    }
    Ok(())
}

/// seccomp: what fails with `EPERM` for the program and its descendants.
fn seccomp(network: Network) -> Result<(), String> {
    fn fail(e: impl std::fmt::Display) -> String {
        format!("cannot set up seccomp: {e}")
    }
    let arch = TargetArch::try_from(std::env::consts::ARCH)
        .map_err(|_| format!("seccomp is not set up for {}", std::env::consts::ARCH))?;
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    for call in [
        libc::SYS_mount,
        libc::SYS_umount2,
        libc::SYS_pivot_root,
        libc::SYS_move_mount,
        libc::SYS_open_tree,
        libc::SYS_fsopen,
        libc::SYS_fsconfig,
        libc::SYS_fsmount,
        libc::SYS_fspick,
        libc::SYS_mount_setattr,
        libc::SYS_bpf,
        libc::SYS_keyctl,
        libc::SYS_add_key,
        libc::SYS_request_key,
        libc::SYS_io_uring_setup,
        libc::SYS_io_uring_enter,
        libc::SYS_io_uring_register,
    ] {
        rules.insert(call, Vec::new());
    }
    let families: &[i32] = match network {
        Network::Off => &[libc::AF_UNIX],
        Network::Loopback | Network::On => &[
            libc::AF_UNIX,
            libc::AF_INET,
            libc::AF_INET6,
            libc::AF_NETLINK,
        ],
    };
    let mut other_family = Vec::new();
    for family in families {
        other_family.push(
            SeccompCondition::new(
                0,
                SeccompCmpArgLen::Dword,
                SeccompCmpOp::Ne,
                u64::from(family.unsigned_abs()),
            )
            .map_err(fail)?,
        );
    }
    rules.insert(
        libc::SYS_socket,
        vec![SeccompRule::new(other_family).map_err(fail)?],
    );
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM.unsigned_abs()),
        arch,
    )
    .map_err(fail)?;
    let program: BpfProgram = filter.try_into().map_err(fail)?;
    seccompiler::apply_filter(&program).map_err(fail)
}

/// Brings up the loopback interface (index 1 in a new network namespace)
/// with one rtnetlink request.
fn loopback_up() -> Result<(), String> {
    use nix::sys::socket::{
        AddressFamily, MsgFlags, NetlinkAddr, SockFlag, SockProtocol, SockType, recv, sendto,
        socket,
    };
    const RTM_NEWLINK: u16 = 16;
    const NLM_F_REQUEST: u16 = 1;
    const NLM_F_ACK: u16 = 4;
    const NLMSG_ERROR: u16 = 2;
    const IFF_UP: u32 = 1;
    let socket = socket(
        AddressFamily::Netlink,
        SockType::Raw,
        SockFlag::SOCK_CLOEXEC,
        SockProtocol::NetlinkRoute,
    )
    .map_err(|e| e.to_string())?;
    let mut message = Vec::with_capacity(32);
    message.extend_from_slice(&32u32.to_ne_bytes());
    message.extend_from_slice(&RTM_NEWLINK.to_ne_bytes());
    message.extend_from_slice(&(NLM_F_REQUEST | NLM_F_ACK).to_ne_bytes());
    message.extend_from_slice(&1u32.to_ne_bytes());
    message.extend_from_slice(&0u32.to_ne_bytes());
    // struct ifinfomsg: family, padding, type, index, flags, change.
    message.extend_from_slice(&[0, 0, 0, 0]);
    message.extend_from_slice(&1i32.to_ne_bytes());
    message.extend_from_slice(&IFF_UP.to_ne_bytes());
    message.extend_from_slice(&IFF_UP.to_ne_bytes());
    sendto(
        socket.as_raw_fd(),
        &message,
        &NetlinkAddr::new(0, 0),
        MsgFlags::empty(),
    )
    .map_err(|e| e.to_string())?;
    let mut answer = [0u8; 512];
    let n = recv(socket.as_raw_fd(), &mut answer, MsgFlags::empty()).map_err(|e| e.to_string())?;
    if n < 20 || u16::from_ne_bytes([answer[4], answer[5]]) != NLMSG_ERROR {
        return Err("the kernel's answer was not an acknowledgement".to_string());
    }
    let code = i32::from_ne_bytes([answer[16], answer[17], answer[18], answer[19]]);
    if code != 0 {
        return Err(nix::errno::Errno::from_raw(-code).to_string());
    }
    Ok(())
}
