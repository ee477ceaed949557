//! How the engine plugs in: registering commands (sync and async), INFO sections, metrics.

mod common;

use std::sync::atomic::{AtomicU64, Ordering};

use common::TestServer;
use urlseen_server::{
    ArgKind, ArgSpec, BoxFuture, Command, CommandError, CommandResult, CommandSpec, Config, Ctx,
    Dispatch, Frame, Parse,
};

#[derive(Default)]
struct App {
    counter: AtomicU64,
}

const INCR: CommandSpec = CommandSpec::new("counter.incrby", 3)
    .flags(&["write", "fast"])
    .keys(1, 1, 1)
    .group("counter")
    .summary("Adds to a counter.")
    .args(&[ArgSpec::new("key", ArgKind::Key), ArgSpec::new("increment", ArgKind::Integer)]);

fn incrby(ctx: Ctx<'_, App>, mut args: Parse) -> CommandResult {
    let _key = args.next_bytes()?;
    let by = args.next_int()?;
    args.finish()?;
    let by =
        u64::try_from(by).map_err(|_| CommandError::custom("ERR increment must be positive"))?;
    let total = ctx.app.counter.fetch_add(by, Ordering::Relaxed) + by;
    Ok(Frame::Integer(i64::try_from(total).unwrap_or(i64::MAX)))
}

const GET: CommandSpec = CommandSpec::new("counter.get", -2).flags(&["readonly"]).keys(1, 1, 1);

fn get<'a>(ctx: Ctx<'a, App>, mut args: Parse) -> BoxFuture<'a, CommandResult> {
    Box::pin(async move {
        let _key = args.next_bytes()?;
        let resp3 = args.next_if_keyword("WITHTYPE");
        args.finish()?;
        tokio::task::yield_now().await;
        let n = ctx.app.counter.load(Ordering::Relaxed);
        Ok(if resp3 {
            Frame::Map(vec![
                (Frame::bulk("value"), Frame::Integer(n as i64)),
                (Frame::bulk("exact"), Frame::Boolean(true)),
            ])
        } else {
            Frame::Integer(n as i64)
        })
    })
}

const PING: CommandSpec = CommandSpec::new("ping", -1);

fn pang(_ctx: Ctx<'_, App>, _args: Parse) -> CommandResult {
    Ok(Frame::simple("PANG"))
}

fn dispatch() -> Dispatch<App> {
    let mut d = Dispatch::new(App::default());
    d.register(Command::sync(INCR, incrby)).register(Command::new_async(GET, get));
    d.info_section("counter", true, |app, _server, out| {
        out.field("counter_value", app.counter.load(Ordering::Relaxed));
    });
    d
}

#[tokio::test]
async fn registered_commands_run_with_the_app_state() {
    let server = TestServer::start_with(Config::default(), dispatch()).await;
    let mut c = server.connect().await;
    c.expect(&["COUNTER.INCRBY", "jobs", "5"], b":5\r\n").await;
    c.expect(&["counter.incrby", "jobs", "2"], b":7\r\n").await;
    c.expect(&["COUNTER.GET", "jobs"], b":7\r\n").await;
    c.expect(
        &["COUNTER.GET", "jobs", "WITHTYPE"],
        b"*4\r\n$5\r\nvalue\r\n:7\r\n$5\r\nexact\r\n:1\r\n",
    )
    .await;
    c.expect(&["COUNTER.GET", "jobs", "EXTRA"], b"-ERR syntax error\r\n").await;
    c.expect(
        &["COUNTER.INCRBY", "jobs"],
        b"-ERR wrong number of arguments for 'counter.incrby' command\r\n",
    )
    .await;
    c.expect(&["COUNTER.INCRBY", "jobs", "x"], b"-ERR value is not an integer or out of range\r\n")
        .await;
    c.expect(&["COUNTER.INCRBY", "jobs", "-1"], b"-ERR increment must be positive\r\n").await;
    c.send_cmd(&["HELLO", "3"]).await;
    c.read_reply().await;
    c.expect(
        &["COUNTER.GET", "jobs", "WITHTYPE"],
        b"%2\r\n$5\r\nvalue\r\n:7\r\n$5\r\nexact\r\n#t\r\n",
    )
    .await;

    // COMMAND knows them: the built-ins and two more.
    let builtins = Dispatch::new(()).commands().len();
    c.expect(&["COMMAND", "COUNT"], format!(":{}\r\n", builtins + 2).as_bytes()).await;
    let Frame::Array(info) = c.call(&["COMMAND", "INFO", "counter.incrby"]).await else { panic!() };
    let Frame::Array(fields) = &info[0] else { panic!() };
    assert_eq!(
        &fields[..6],
        &[
            Frame::bulk("counter.incrby"),
            Frame::Integer(3),
            Frame::Set(vec![Frame::simple("write"), Frame::simple("fast")]),
            Frame::Integer(1),
            Frame::Integer(1),
            Frame::Integer(1),
        ]
    );

    // INFO shows the app's section by default.
    let Frame::Verbatim { data, .. } = c.call(&["INFO"]).await else { panic!() };
    assert!(String::from_utf8_lossy(&data).ends_with("# Counter\r\ncounter_value:7\r\n"));
}

#[tokio::test]
async fn metrics_count_calls_errors_and_latency() {
    let server = TestServer::start_with(Config::default(), dispatch()).await;
    let mut c = server.connect().await;
    for i in 1..=10 {
        c.expect(&["COUNTER.INCRBY", "k", "1"], format!(":{i}\r\n").as_bytes()).await;
    }
    c.expect(&["COUNTER.INCRBY", "k", "-1"], b"-ERR increment must be positive\r\n").await;
    c.expect(
        &["COUNTER.INCRBY"],
        b"-ERR wrong number of arguments for 'counter.incrby' command\r\n",
    )
    .await;
    c.expect(&["NOPE"], b"-ERR unknown command 'NOPE', with args beginning with: \r\n").await;
    let stats = server.metrics.command("counter.incrby").unwrap();
    assert_eq!(stats.calls(), 11);
    assert_eq!(stats.failed(), 1);
    assert_eq!(stats.rejected(), 1);
    assert_eq!(stats.buckets().iter().sum::<u64>(), stats.calls());
    assert_eq!(server.metrics.commands_total(), 11);
    assert_eq!(server.metrics.error_replies(), 3);
    assert_eq!(server.metrics.unknown_commands(), 1);
    assert_eq!(server.metrics.connections_current(), 1);
    assert_eq!(server.metrics.connections_total(), 1);
    assert!(server.metrics.net_input_bytes() > 0 && server.metrics.net_output_bytes() > 0);
    let mut text = String::new();
    server.metrics.write_prometheus(&mut text);
    assert!(
        text.contains("urlseen_resp_command_calls_total{command=\"counter.incrby\"} 11\n"),
        "{text}"
    );
    assert!(
        text.contains("urlseen_resp_command_rejected_total{command=\"counter.incrby\"} 1\n"),
        "{text}"
    );
    assert!(text.contains("urlseen_resp_connections 1\n"), "{text}");
    drop(c);
}

#[tokio::test]
async fn a_builtin_can_be_replaced() {
    let mut d = dispatch();
    d.register(Command::sync(PING, pang));
    let server = TestServer::start_with(Config::default(), d).await;
    let mut c = server.connect().await;
    c.expect(&["PING"], b"+PANG\r\n").await;
    // Replaced, not added: still the built-ins and the two of `dispatch()`.
    let builtins = Dispatch::new(()).commands().len();
    c.expect(&["COMMAND", "COUNT"], format!(":{}\r\n", builtins + 2).as_bytes()).await;
}

#[tokio::test]
async fn registered_commands_need_auth_unless_flagged() {
    let config = Config { requirepass: Some("pw".into()), ..Config::default() };
    let server = TestServer::start_with(config, dispatch()).await;
    let mut c = server.connect().await;
    c.expect(&["COUNTER.GET", "k"], b"-NOAUTH Authentication required.\r\n").await;
    c.expect(&["AUTH", "pw"], b"+OK\r\n").await;
    c.expect(&["COUNTER.GET", "k"], b":0\r\n").await;
}
