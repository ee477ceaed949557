//! A TCP proxy that delays every chunk it forwards by a fixed time, each way: a stand-in for
//! `tc qdisc … netem delay` on kernels without the netem qdisc (so `urlseen bench redis` can
//! be run at the paper's ~0.4 ms round trip on one machine). Standard library only:
//!
//! ```text
//! rustc -O -o /tmp/delay_proxy scripts/delay_proxy.rs
//! /tmp/delay_proxy 127.0.0.1:7501 127.0.0.1:7401 200   # listen, forward to, µs each way
//! ```
//!
//! Order is kept (one FIFO per direction), bandwidth is not limited, and the delay is a floor:
//! the writer sleeps until each chunk's due time, so scheduling adds a few tens of µs.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

fn pump(mut from: TcpStream, mut to: TcpStream, delay: Duration) {
    let (tx, rx) = mpsc::channel::<(Instant, Vec<u8>)>();
    let writer = thread::spawn(move || {
        for (due, chunk) in rx {
            let now = Instant::now();
            if due > now {
                thread::sleep(due - now);
            }
            if to.write_all(&chunk).is_err() {
                break;
            }
        }
        let _ = to.shutdown(Shutdown::Write);
    });
    let mut buf = vec![0u8; 1 << 16];
    loop {
        match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if tx.send((Instant::now() + delay, buf[..n].to_vec())).is_err() {
                    break;
                }
            }
        }
    }
    drop(tx);
    let _ = writer.join();
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 4 {
        eprintln!("usage: delay_proxy LISTEN_ADDR TARGET_ADDR DELAY_MICROS_EACH_WAY");
        std::process::exit(2);
    }
    let delay = Duration::from_micros(args[3].parse().expect("delay in microseconds"));
    let listener = TcpListener::bind(&args[1]).expect("bind the listen address");
    for client in listener.incoming() {
        let Ok(client) = client else { continue };
        let target = args[2].clone();
        thread::spawn(move || {
            let Ok(server) = TcpStream::connect(&target) else { return };
            let _ = client.set_nodelay(true);
            let _ = server.set_nodelay(true);
            let (Ok(c2), Ok(s2)) = (client.try_clone(), server.try_clone()) else { return };
            let up = thread::spawn(move || pump(client, server, delay));
            pump(s2, c2, delay);
            let _ = up.join();
        });
    }
}
