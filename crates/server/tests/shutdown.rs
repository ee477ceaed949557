//! Graceful shutdown: stop accepting, finish what was received, drain, return.

mod common;

use std::time::{Duration, Instant};

use common::{TestServer, WAIT, resp};
use urlseen_server::{
    BoxFuture, Command, CommandResult, CommandSpec, Config, Ctx, Dispatch, Frame, Parse,
};

const SLOW: CommandSpec = CommandSpec::new("slow", 2).summary("Sleeps for the given milliseconds.");

fn slow<'a>(_ctx: Ctx<'a, ()>, mut args: Parse) -> BoxFuture<'a, CommandResult> {
    Box::pin(async move {
        let ms = args.next_int()?;
        args.finish()?;
        tokio::time::sleep(Duration::from_millis(ms.unsigned_abs())).await;
        Ok(Frame::bulk("slept"))
    })
}

fn dispatch() -> Dispatch<()> {
    Dispatch::new(()).with(Command::new_async(SLOW, slow))
}

#[tokio::test]
async fn in_flight_pipeline_finishes_then_connections_close() {
    let mut server = TestServer::start_with(Config::default(), dispatch()).await;
    let addr = server.addr;
    let mut busy = server.connect().await;
    let mut idle = server.connect().await;
    idle.expect(&["PING"], b"+PONG\r\n").await;

    let mut pipeline = resp(&[b"SLOW", b"300"]);
    pipeline.extend_from_slice(&resp(&[b"PING"]));
    pipeline.extend_from_slice(&resp(&[b"ECHO", b"after"]));
    busy.send(&pipeline).await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    let started = Instant::now();
    server.signal_shutdown();

    // Everything received before the signal is executed and answered, in order.
    assert_eq!(busy.read_frames(3).await, b"$5\r\nslept\r\n+PONG\r\n$5\r\nafter\r\n");
    busy.assert_closed().await;
    idle.assert_closed().await;
    server.join().await;
    assert!(started.elapsed() < WAIT);
    // The listener is closed.
    assert!(tokio::net::TcpStream::connect(addr).await.is_err());
}

#[tokio::test]
async fn the_grace_period_bounds_the_wait() {
    let config = Config { shutdown_grace: Duration::from_millis(200), ..Config::default() };
    let mut server = TestServer::start_with(config, dispatch()).await;
    let mut stuck = server.connect().await;
    stuck.send(&resp(&[b"SLOW", b"30000"])).await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    let started = Instant::now();
    server.shutdown().await;
    assert!(started.elapsed() < Duration::from_secs(3), "run waited {:?}", started.elapsed());
    stuck.assert_closed().await;
}

#[tokio::test]
async fn shutdown_with_no_clients_is_immediate() {
    let mut server = TestServer::start(Config::default()).await;
    let started = Instant::now();
    server.shutdown().await;
    assert!(started.elapsed() < Duration::from_secs(1));
}
