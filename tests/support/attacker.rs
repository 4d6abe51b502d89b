//! A loopback server that stands for an attacker's endpoint: it accepts
//! anything and records every connection and every byte it was sent, so
//! that a test can prove nothing reached it.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use tokio::io::AsyncReadExt;

#[derive(Default)]
struct Seen {
    connections: usize,
    bytes: Vec<u8>,
}

pub struct Attacker {
    pub addr: SocketAddr,
    seen: Arc<Mutex<Seen>>,
    _task: tokio::task::JoinHandle<()>,
}

impl Attacker {
    pub async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Seen::default()));
        let recorder = seen.clone();
        let task = tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                recorder.lock().unwrap().connections += 1;
                let recorder = recorder.clone();
                tokio::spawn(async move {
                    let mut buf = [0u8; 4096];
                    while let Ok(n) = socket.read(&mut buf).await {
                        if n == 0 {
                            break;
                        }
                        recorder.lock().unwrap().bytes.extend_from_slice(&buf[..n]);
                    }
                });
            }
        });
        Self {
            addr,
            seen,
            _task: task,
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Fails the test if anything connected.
    pub fn assert_untouched(&self) {
        let seen = self.seen.lock().unwrap();
        assert_eq!(
            seen.connections,
            0,
            "the attacker's server was reached and sent: {}",
            String::from_utf8_lossy(&seen.bytes)
        );
    }
}
