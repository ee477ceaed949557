//! The RESP server with the connection commands only, for trying clients against it:
//!
//! ```text
//! cargo run -p urlseen-server --example resp_server -- 127.0.0.1:16380 [password]
//! redis-cli -p 16380 PING
//! ```
//!
//! Stops on Ctrl-C or SIGTERM, gracefully.

use std::sync::Arc;

use urlseen_server::{Config, Dispatch, run};

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let addr = args.next().unwrap_or_else(|| "127.0.0.1:16380".to_owned());
    let config = Config { requirepass: args.next(), ..Config::default() };
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    eprintln!("listening on {}", listener.local_addr()?);
    let shutdown = async {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("SIGTERM handler");
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
        eprintln!("shutting down");
    };
    run(listener, config, Arc::new(Dispatch::new(())), shutdown).await
}
