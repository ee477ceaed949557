//! Every built-in connection command, byte for byte, over a real socket.

mod common;

use common::{TestServer, resp};
use urlseen_server::{Config, Frame};

const VERSION: &str = env!("CARGO_PKG_VERSION");

fn hello_map(proto: u8, id: u64, resp3: bool) -> Vec<u8> {
    let head = if resp3 { "%7\r\n".to_owned() } else { "*14\r\n".to_owned() };
    format!(
        "{head}$6\r\nserver\r\n$7\r\nurlseen\r\n$7\r\nversion\r\n${}\r\n{VERSION}\r\n$5\r\nproto\r\n:{proto}\r\n\
         $2\r\nid\r\n:{id}\r\n$4\r\nmode\r\n$10\r\nstandalone\r\n$4\r\nrole\r\n$6\r\nmaster\r\n\
         $7\r\nmodules\r\n*0\r\n",
        VERSION.len()
    )
    .into_bytes()
}

#[tokio::test]
async fn ping_and_echo() {
    let server = TestServer::start(Config::default()).await;
    let mut c = server.connect().await;
    c.expect(&["PING"], b"+PONG\r\n").await;
    c.expect(&["ping"], b"+PONG\r\n").await;
    c.expect(&["PING", "hello world"], b"$11\r\nhello world\r\n").await;
    c.expect(&["PING", "a", "b"], b"-ERR wrong number of arguments for 'ping' command\r\n").await;
    c.expect(&["ECHO", "hi"], b"$2\r\nhi\r\n").await;
    c.expect(&["ECHO", ""], b"$0\r\n\r\n").await;
    c.expect(&["ECHO"], b"-ERR wrong number of arguments for 'echo' command\r\n").await;
    c.expect(&["ECHO", "a", "b"], b"-ERR wrong number of arguments for 'echo' command\r\n").await;
    // Binary-safe.
    c.expect_raw(&resp(&[b"ECHO", b"\x00\xff\r\n"]), b"$4\r\n\x00\xff\r\n\r\n").await;
}

#[tokio::test]
async fn inline_commands_work_like_telnet() {
    let server = TestServer::start(Config::default()).await;
    let mut c = server.connect().await;
    c.expect_raw(b"PING\r\n", b"+PONG\r\n").await;
    c.expect_raw(b"PING\n", b"+PONG\r\n").await;
    c.expect_raw(b"ECHO hello\r\n", b"$5\r\nhello\r\n").await;
    c.expect_raw(b"ECHO \"hello world\"\r\n", b"$11\r\nhello world\r\n").await;
    c.expect_raw(b"ECHO 'it\\'s'\r\n", b"$4\r\nit's\r\n").await;
    c.expect_raw(b"ECHO \"\\x41\\tB\"\r\n", b"$3\r\nA\tB\r\n").await;
    // Empty lines are ignored, like Redis.
    c.expect_raw(b"\r\n\r\n   \r\nPING\r\n", b"+PONG\r\n").await;
    // Unbalanced quotes are a protocol error that closes the connection.
    c.expect_raw(b"ECHO \"oops\r\n", b"-ERR Protocol error: unbalanced quotes in request\r\n")
        .await;
    c.assert_closed().await;
}

#[tokio::test]
async fn unknown_commands_answer_like_redis() {
    let server = TestServer::start(Config::default()).await;
    let mut c = server.connect().await;
    c.expect(&["NOPE"], b"-ERR unknown command 'NOPE', with args beginning with: \r\n").await;
    c.expect(
        &["nope", "a", "b c"],
        b"-ERR unknown command 'nope', with args beginning with: 'a' 'b c' \r\n",
    )
    .await;
    c.expect_raw(
        b"FOO bar\r\n",
        b"-ERR unknown command 'FOO', with args beginning with: 'bar' \r\n",
    )
    .await;
    c.expect_raw(
        &resp(&[b"x\r\ny", b"1\n2"]),
        b"-ERR unknown command 'x  y', with args beginning with: '1 2' \r\n",
    )
    .await;
    // The connection goes on.
    c.expect(&["PING"], b"+PONG\r\n").await;
    assert_eq!(server.metrics.unknown_commands(), 4);
}

#[tokio::test]
async fn select_has_one_database() {
    let server = TestServer::start(Config::default()).await;
    let mut c = server.connect().await;
    c.expect(&["SELECT", "0"], b"+OK\r\n").await;
    c.expect(&["SELECT", "1"], b"-ERR DB index is out of range\r\n").await;
    c.expect(&["SELECT", "-1"], b"-ERR DB index is out of range\r\n").await;
    c.expect(&["SELECT", "x"], b"-ERR value is not an integer or out of range\r\n").await;
    c.expect(&["SELECT", "99999999999"], b"-ERR value is not an integer or out of range\r\n").await;
    c.expect(&["SELECT"], b"-ERR wrong number of arguments for 'select' command\r\n").await;
}

#[tokio::test]
async fn quit_replies_ok_then_closes() {
    let server = TestServer::start(Config::default()).await;
    let mut c = server.connect().await;
    // Commands pipelined after QUIT are not executed.
    c.send(&[resp(&[b"PING"]), resp(&[b"QUIT"]), resp(&[b"PING"])].concat()).await;
    assert_eq!(c.read_frames(2).await, b"+PONG\r\n+OK\r\n");
    c.assert_closed().await;
}

#[tokio::test]
async fn hello_switches_protocol_and_describes_the_server() {
    let server = TestServer::start(Config::default()).await;
    let mut c = server.connect().await;
    c.expect(&["HELLO"], &hello_map(2, 1, false)).await;
    c.expect(&["HELLO", "3"], &hello_map(3, 1, true)).await;
    // RESP3 from now on: a null is `_`, a verbatim string keeps its format.
    c.expect(&["CLIENT", "GETNAME"], b"_\r\n").await;
    c.expect(&["HELLO", "3", "SETNAME", "crawler"], &hello_map(3, 1, true)).await;
    c.expect(&["CLIENT", "GETNAME"], b"$7\r\ncrawler\r\n").await;
    c.expect(&["HELLO", "2"], &hello_map(2, 1, false)).await;
    c.expect(&["CLIENT", "SETNAME", ""], b"+OK\r\n").await;
    c.expect(&["CLIENT", "GETNAME"], b"$-1\r\n").await;
    c.expect(&["HELLO", "4"], b"-NOPROTO unsupported protocol version\r\n").await;
    c.expect(&["HELLO", "1"], b"-NOPROTO unsupported protocol version\r\n").await;
    c.expect(&["HELLO", "three"], b"-ERR Protocol version is not an integer or out of range\r\n")
        .await;
    c.expect(&["HELLO", "3", "BOGUS"], b"-ERR Syntax error in HELLO option 'BOGUS'\r\n").await;
    c.expect(&["HELLO", "3", "AUTH", "default"], b"-ERR Syntax error in HELLO option 'AUTH'\r\n")
        .await;
    c.expect(
        &["HELLO", "3", "SETNAME", "bad name"],
        b"-ERR Client names cannot contain spaces, newlines or special characters.\r\n",
    )
    .await;
    // A failed HELLO changes nothing.
    c.expect(&["CLIENT", "GETNAME"], b"$-1\r\n").await;
    // Without a password, HELLO AUTH default <anything> succeeds, like Redis' nopass user.
    c.expect(&["HELLO", "2", "AUTH", "default", "whatever"], &hello_map(2, 1, false)).await;
    c.expect(
        &["HELLO", "2", "AUTH", "alice", "whatever"],
        b"-WRONGPASS invalid username-password pair or user is disabled.\r\n",
    )
    .await;
    // The second client gets the next id.
    let mut d = server.connect().await;
    d.expect(&["HELLO", "3"], &hello_map(3, 2, true)).await;
}

#[tokio::test]
async fn resp3_replies_are_downgraded_for_resp2_clients() {
    let server = TestServer::start(Config::default()).await;
    let mut c = server.connect().await;
    // INFO is a verbatim string in RESP3 and a bulk string in RESP2.
    c.send_cmd(&["INFO", "replication"]).await;
    let text = "# Replication\r\nrole:master\r\nconnected_slaves:0\r\n";
    assert_eq!(c.read_reply().await, format!("${}\r\n{text}\r\n", text.len()).into_bytes());
    c.send_cmd(&["HELLO", "3"]).await;
    c.read_reply().await;
    c.send_cmd(&["INFO", "replication"]).await;
    assert_eq!(c.read_reply().await, format!("={}\r\ntxt:{text}\r\n", text.len() + 4).into_bytes());
}

#[tokio::test]
async fn client_subcommands() {
    let server = TestServer::start(Config::default()).await;
    let mut c = server.connect().await;
    c.expect(&["CLIENT", "ID"], b":1\r\n").await;
    c.expect(&["client", "id"], b":1\r\n").await;
    c.expect(&["CLIENT", "GETNAME"], b"$-1\r\n").await;
    c.expect(&["CLIENT", "SETNAME", "worker-1"], b"+OK\r\n").await;
    c.expect(&["CLIENT", "GETNAME"], b"$8\r\nworker-1\r\n").await;
    c.expect(
        &["CLIENT", "SETNAME", "has space"],
        b"-ERR Client names cannot contain spaces, newlines or special characters.\r\n",
    )
    .await;
    c.expect(&["CLIENT", "SETINFO", "LIB-NAME", "redis-py"], b"+OK\r\n").await;
    c.expect(&["CLIENT", "SETINFO", "lib-ver", "5.0.1"], b"+OK\r\n").await;
    c.expect(&["CLIENT", "SETINFO", "FOO", "x"], b"-ERR Unrecognized option 'FOO'\r\n").await;
    c.expect(
        &["CLIENT", "SETINFO", "lib-name", "a b"],
        b"-ERR lib-name cannot contain spaces, newlines or special characters.\r\n",
    )
    .await;
    c.expect(&["CLIENT"], b"-ERR wrong number of arguments for 'client' command\r\n").await;
    c.expect(
        &["CLIENT", "SETNAME"],
        b"-ERR wrong number of arguments for 'client|setname' command\r\n",
    )
    .await;
    c.expect(&["CLIENT", "ID", "x"], b"-ERR wrong number of arguments for 'client|id' command\r\n")
        .await;
    c.expect(&["CLIENT", "FROB"], b"-ERR unknown subcommand 'FROB'. Try CLIENT HELP.\r\n").await;
    c.expect(&["client", "frob"], b"-ERR unknown subcommand 'frob'. Try CLIENT HELP.\r\n").await;
    c.expect(&["CLIENT", "LIST", "TYPE", "bogus"], b"-ERR Unknown client type 'bogus'\r\n").await;
    c.expect(&["CLIENT", "LIST", "TYPE", "replica"], b"$0\r\n\r\n").await;
    c.expect(&["CLIENT", "LIST", "ID", "x"], b"-ERR Invalid client ID\r\n").await;
    c.expect(&["CLIENT", "LIST", "BOGUS"], b"-ERR syntax error\r\n").await;

    let Frame::Bulk(info) = c.call(&["CLIENT", "INFO"]).await else {
        panic!("CLIENT INFO is not a bulk")
    };
    let info = String::from_utf8(info.to_vec()).unwrap();
    assert!(info.starts_with("id=1 addr=127.0.0.1:"), "{info}");
    assert!(info.contains(" name=worker-1 "), "{info}");
    assert!(info.contains(" cmd=client|info "), "{info}");
    assert!(info.contains(" resp=2 lib-name=redis-py lib-ver=5.0.1\n"), "{info}");

    let mut d = server.connect().await;
    d.expect(&["PING"], b"+PONG\r\n").await;
    let Frame::Bulk(list) = c.call(&["CLIENT", "LIST"]).await else {
        panic!("CLIENT LIST is not a bulk")
    };
    let list = String::from_utf8(list.to_vec()).unwrap();
    let lines: Vec<&str> = list.lines().collect();
    assert_eq!(lines.len(), 2, "{list}");
    assert!(lines[0].starts_with("id=1 ") && lines[0].contains(" cmd=client|list "), "{list}");
    assert!(lines[1].starts_with("id=2 ") && lines[1].contains(" cmd=ping "), "{list}");
    let Frame::Bulk(one) = c.call(&["CLIENT", "LIST", "ID", "2", "99"]).await else { panic!() };
    assert!(one.starts_with(b"id=2 ") && one.iter().filter(|&&b| b == b'\n').count() == 1);
    let Frame::Array(help) = c.call(&["CLIENT", "HELP"]).await else {
        panic!("CLIENT HELP is not an array")
    };
    assert!(matches!(&help[0], Frame::Simple(s) if s.starts_with(b"CLIENT <subcommand>")));
}

#[tokio::test]
async fn command_introspection_is_enough_for_redis_cli() {
    let server = TestServer::start(Config::default()).await;
    // The connection commands (9), the transaction commands (5), SLOWLOG and CONFIG.
    let mut c = server.connect().await;
    c.expect(&["COMMAND", "COUNT"], b":16\r\n").await;
    c.expect(
        &["COMMAND", "INFO", "ping"],
        b"*1\r\n*10\r\n$4\r\nping\r\n:-1\r\n*1\r\n+fast\r\n:0\r\n:0\r\n:0\r\n*2\r\n+@fast\r\n+@connection\r\n\
          *0\r\n*0\r\n*0\r\n",
    )
    .await;
    c.expect(&["COMMAND", "INFO", "nosuch"], b"*1\r\n$-1\r\n").await;
    c.expect(
        &["COMMAND", "DOCS", "echo"],
        b"*2\r\n$4\r\necho\r\n*8\r\n$7\r\nsummary\r\n$25\r\nReturns the given string.\r\n\
          $5\r\nsince\r\n$5\r\n1.0.0\r\n$5\r\ngroup\r\n$10\r\nconnection\r\n\
          $9\r\narguments\r\n*1\r\n*4\r\n$4\r\nname\r\n$7\r\nmessage\r\n$4\r\ntype\r\n$6\r\nstring\r\n",
    )
    .await;
    c.expect(&["COMMAND", "DOCS", "nosuch"], b"*0\r\n").await;
    c.expect(&["COMMAND", "BOGUS"], b"-ERR unknown subcommand 'BOGUS'. Try COMMAND HELP.\r\n")
        .await;
    c.expect(
        &["COMMAND", "COUNT", "x"],
        b"-ERR wrong number of arguments for 'command|count' command\r\n",
    )
    .await;

    let Frame::Array(all) = c.call(&["COMMAND"]).await else { panic!("COMMAND is not an array") };
    assert_eq!(all.len(), 16);
    let Frame::Array(docs) = c.call(&["COMMAND", "DOCS"]).await else {
        panic!("DOCS is not a flat map")
    };
    assert_eq!(docs.len(), 32);
    let Frame::Array(names) = c.call(&["COMMAND", "LIST"]).await else { panic!() };
    assert!(names.contains(&Frame::bulk("client|setname")));
    c.expect(
        &["COMMAND", "LIST", "FILTERBY", "PATTERN", "c*|*name"],
        b"*2\r\n$14\r\nclient|getname\r\n$14\r\nclient|setname\r\n",
    )
    .await;
    c.expect(&["COMMAND", "LIST", "FILTERBY", "MODULE", "bf"], b"*0\r\n").await;

    // In RESP3, DOCS is a real map, INFO's flags are sets.
    c.send_cmd(&["HELLO", "3"]).await;
    c.read_reply().await;
    c.expect(
        &["COMMAND", "INFO", "ping"],
        b"*1\r\n*10\r\n$4\r\nping\r\n:-1\r\n~1\r\n+fast\r\n:0\r\n:0\r\n:0\r\n~2\r\n+@fast\r\n+@connection\r\n\
          ~0\r\n~0\r\n~0\r\n",
    )
    .await;
    let Frame::Map(docs) = c.call(&["COMMAND", "DOCS"]).await else { panic!("DOCS is not a map") };
    assert_eq!(docs.len(), 16);
}

#[tokio::test]
async fn info_sections() {
    let server = TestServer::start(Config::default()).await;
    let mut c = server.connect().await;
    c.expect(&["PING"], b"+PONG\r\n").await;
    let Frame::Bulk(all) = c.call(&["INFO"]).await else { panic!("INFO is not a bulk") };
    let all = String::from_utf8(all.to_vec()).unwrap();
    let headers: Vec<&str> = all.lines().filter(|l| l.starts_with('#')).collect();
    assert_eq!(
        headers,
        ["# Server", "# Clients", "# Persistence", "# Stats", "# Replication", "# Keyspace"]
    );
    assert!(all.starts_with("# Server\r\nredis_version:7.2.0\r\nurlseen_version:"), "{all}");
    assert!(all.contains("\r\nredis_mode:standalone\r\n"), "{all}");
    assert!(all.contains(&format!("\r\ntcp_port:{}\r\n", server.addr.port())), "{all}");
    assert!(
        all.contains("\r\n\r\n# Clients\r\nconnected_clients:1\r\nmaxclients:10000\r\n"),
        "{all}"
    );
    assert!(all.contains("\r\nloading:0\r\n"), "{all}");
    assert!(all.contains("\r\ntotal_commands_processed:1\r\n"), "{all}");
    assert!(!all.contains("cmdstat_"), "{all}");

    let Frame::Bulk(stats) = c.call(&["INFO", "COMMANDSTATS", "clients"]).await else { panic!() };
    let stats = String::from_utf8(stats.to_vec()).unwrap();
    assert!(stats.starts_with("# Clients\r\n"), "{stats}");
    assert!(stats.contains("\r\n# Commandstats\r\ncmdstat_ping:calls=1,usec="), "{stats}");
    assert!(stats.contains("cmdstat_info:calls=1,"), "{stats}");
    c.expect(&["INFO", "nosuchsection"], b"$0\r\n\r\n").await;
    let Frame::Bulk(everything) = c.call(&["INFO", "everything"]).await else { panic!() };
    assert!(everything.windows(14).any(|w| w == b"# Commandstats"));
}

#[tokio::test]
async fn pipelined_commands_are_answered_in_order() {
    let server = TestServer::start(Config::default()).await;
    let mut c = server.connect().await;
    let mut batch = Vec::new();
    let mut want = Vec::new();
    for i in 0..1000 {
        let s = i.to_string();
        batch.extend_from_slice(&resp(&[b"ECHO", s.as_bytes()]));
        want.extend_from_slice(format!("${}\r\n{s}\r\n", s.len()).as_bytes());
        if i % 100 == 0 {
            batch.extend_from_slice(b"PING\r\n");
            want.extend_from_slice(b"+PONG\r\n");
        }
    }
    c.send(&batch).await;
    assert_eq!(c.read_frames(1010).await, want);
    // A frame split over many writes is reassembled.
    let req = resp(&[b"ECHO", b"split"]);
    for byte in &req {
        c.send(&[*byte]).await;
        tokio::task::yield_now().await;
    }
    assert_eq!(c.read_reply().await, b"$5\r\nsplit\r\n");
}

#[tokio::test]
async fn big_pipelines_with_big_replies_do_not_deadlock() {
    // Replies to a 4 MiB pipeline exceed any socket buffer: the server must keep writing
    // while the client is still sending.
    let server = TestServer::start(Config::default()).await;
    let c = server.connect().await;
    let value = vec![b'v'; 4096];
    let request = resp(&[b"ECHO", &value]);
    let reply_len = "$4096\r\n".len() + 4096 + 2;
    let n = 1024;
    let (mut rd, mut wr) = c.stream.into_split();
    let writer = tokio::spawn(async move {
        use tokio::io::AsyncWriteExt;
        for _ in 0..n {
            wr.write_all(&request).await.unwrap();
        }
        wr
    });
    let mut total = 0;
    let mut buf = vec![0u8; 65536];
    while total < n * reply_len {
        use tokio::io::AsyncReadExt;
        let r = tokio::time::timeout(common::WAIT, rd.read(&mut buf)).await.unwrap().unwrap();
        assert!(r > 0);
        total += r;
    }
    assert_eq!(total, n * reply_len);
    writer.await.unwrap();
}
