//! The private PostgreSQL and NATS servers that the team gateway's tests
//! run against (tests/support/services.rs): each answers on its own free
//! loopback port, keeps to itself, stops and starts again on that port,
//! and is gone once dropped.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::Command;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::support::acp_client::TIMEOUT;
use crate::support::services::{Nats, Postgres};

#[test]
fn a_private_postgres_answers_psql_on_its_port_and_is_gone_after_drop() {
    let postgres = Postgres::start();
    let port = postgres.port();
    assert_eq!(
        postgres.url(),
        format!("postgres://pincer@127.0.0.1:{port}/pincer")
    );

    let output = Command::new(postgres.bin().join("psql"))
        .args(["-X", "-h", "127.0.0.1", "-p", &port.to_string()])
        .args(["-U", "pincer", "-d", "pincer", "-tAc", "select 1"])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&output.stdout), "1\n");

    // Through the URL: who and where, and the settings the support chose.
    assert_eq!(
        postgres.psql(
            "select current_user, current_database(), current_setting('server_encoding'), \
             current_setting('listen_addresses'), current_setting('fsync')"
        ),
        "pincer|pincer|UTF8|127.0.0.1|off"
    );

    drop(postgres);
    assert!(
        TcpStream::connect(("127.0.0.1", port)).is_err(),
        "something still listens on port {port} after the server was dropped"
    );
}

#[test]
fn two_postgres_servers_started_at_once_have_their_own_ports_and_data() {
    let (a, b) = std::thread::scope(|scope| {
        let a = scope.spawn(Postgres::start);
        let b = scope.spawn(Postgres::start);
        (a.join().unwrap(), b.join().unwrap())
    });
    assert_ne!(a.port(), b.port());

    a.psql("create table notes (body text); insert into notes values ('only in a')");
    assert_eq!(a.psql("select body from notes"), "only in a");
    assert_eq!(b.psql("select to_regclass('notes') is null"), "t");
}

#[test]
fn a_stopped_postgres_refuses_connections_and_starts_again_with_its_data() {
    let mut postgres = Postgres::start();
    let port = postgres.port();
    postgres.psql("create table notes (body text); insert into notes values ('kept')");

    postgres.stop();
    assert!(TcpStream::connect(("127.0.0.1", port)).is_err());
    let refused = postgres.try_psql("select 1").unwrap_err();
    assert!(refused.contains("Connection refused"), "{refused}");

    postgres.start_again();
    assert_eq!(postgres.port(), port);
    assert_eq!(postgres.psql("select body from notes"), "kept");
}

/// A raw NATS client: the connection's reader, past the server's `INFO`
/// line, which is returned as JSON.
fn connect(nats: &Nats) -> (BufReader<TcpStream>, Value) {
    let stream = TcpStream::connect(("127.0.0.1", nats.port())).unwrap();
    stream.set_read_timeout(Some(TIMEOUT)).unwrap();
    let mut reader = BufReader::new(stream);
    let info = read_line(&mut reader);
    let json = info
        .strip_prefix("INFO ")
        .unwrap_or_else(|| panic!("the server's first line is not INFO: {info:?}"));
    (reader, serde_json::from_str(json.trim_end()).unwrap())
}

fn read_line(reader: &mut BufReader<TcpStream>) -> String {
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    line
}

fn send(reader: &mut BufReader<TcpStream>, text: &str) {
    reader.get_mut().write_all(text.as_bytes()).unwrap();
}

#[test]
fn a_private_nats_server_greets_a_client_with_its_info_line() {
    let nats = Nats::start();
    let port = nats.port();
    assert_eq!(nats.url(), format!("nats://127.0.0.1:{port}"));

    let (_, info) = connect(&nats);
    assert_eq!(
        json!({"host": info["host"], "port": info["port"]}),
        json!({"host": "127.0.0.1", "port": port})
    );

    drop(nats);
    assert!(TcpStream::connect(("127.0.0.1", port)).is_err());
}

#[test]
fn a_message_published_on_one_nats_connection_reaches_a_subscriber_on_another() {
    let nats = Nats::start();
    let (mut subscriber, _) = connect(&nats);
    let (mut publisher, _) = connect(&nats);

    send(
        &mut subscriber,
        "CONNECT {\"verbose\":false}\r\nSUB t 1\r\nPING\r\n",
    );
    // The server answers in order: its PONG means the SUB is in place.
    assert_eq!(read_line(&mut subscriber), "PONG\r\n");

    send(
        &mut publisher,
        "CONNECT {\"verbose\":false}\r\nPUB t 2\r\nhi\r\n",
    );
    assert_eq!(read_line(&mut subscriber), "MSG t 1 2\r\n");
    assert_eq!(read_line(&mut subscriber), "hi\r\n");
}

#[test]
fn a_stopped_nats_server_drops_its_clients_and_restarts_on_the_same_port() {
    let mut nats = Nats::start();
    let port = nats.port();
    let (mut client, _) = connect(&nats);

    nats.stop();
    let mut rest = Vec::new();
    let end = client.read_to_end(&mut rest);
    assert!(
        end.is_err() || rest.is_empty(),
        "the connection outlived the server: {end:?} {rest:?}"
    );
    assert!(TcpStream::connect(("127.0.0.1", port)).is_err());

    nats.restart();
    assert_eq!(nats.port(), port);
    let (_, info) = connect(&nats);
    assert_eq!(info["port"], json!(port));
}
