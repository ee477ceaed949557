//! The HTTP side: /healthz, /metrics, and the JSON API, over a real socket.

#![allow(clippy::unwrap_used, reason = "tests: a failed unwrap is a failed test")]

mod common;

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use urlseen_server::http::{HttpState, router, serve};
use urlseen_server::{App, Config};

struct Http {
    addr: SocketAddr,
    resp: common::TestServer,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    handle: tokio::task::JoinHandle<std::io::Result<()>>,
}

async fn start(password: Option<&str>) -> Http {
    let app = Arc::new(App::in_memory());
    let config = Config { requirepass: password.map(str::to_owned), ..Config::default() };
    let resp = common::TestServer::start_app(config, app.clone()).await;
    let state = HttpState::new(app, resp.metrics.clone())
        .requirepass(password.map(str::to_owned))
        .metrics_source(Arc::new(|out: &mut String| out.push_str("extra_source_metric 1\n")));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let handle = tokio::spawn(serve(listener, router(state), async {
        let _ = stopped.await;
    }));
    Http { addr, resp, stop: Some(stop), handle }
}

/// One request, `Connection: close`; the status, the headers and the body.
async fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, String, String) {
    let mut s = TcpStream::connect(addr).await.unwrap();
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    if !body.is_empty() || method == "POST" {
        req.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    req.push_str("\r\n");
    req.push_str(body);
    s.write_all(req.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    tokio::time::timeout(common::WAIT, s.read_to_end(&mut raw)).await.unwrap().unwrap();
    let text = String::from_utf8(raw).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    (status, head.to_owned(), body.to_owned())
}

const JSON: (&str, &str) = ("Content-Type", "application/json");

#[tokio::test]
async fn health_and_metrics() {
    let h = start(None).await;
    let (status, _, body) = request(h.addr, "GET", "/healthz", &[], "").await;
    assert_eq!((status, body.as_str()), (200, "ok\n"));
    let mut c = h.resp.connect().await;
    c.expect(
        &["URL.SEEN", "jobs", "https://a.example/", "https://b.example/"],
        b"*2\r\n:0\r\n:0\r\n",
    )
    .await;
    c.expect(&["BF.ADD", "bf", "x"], b":1\r\n").await;
    let (status, head, body) = request(h.addr, "GET", "/metrics", &[], "").await;
    assert_eq!(status, 200);
    assert!(head.contains("content-type: text/plain; version=0.0.4"), "{head}");
    for line in [
        "urlseen_resp_connections 1\n",
        "urlseen_resp_command_calls_total{command=\"url.seen\"} 1\n",
        "urlseen_resp_command_duration_seconds_count{command=\"bf.add\"} 1\n",
        "urlseen_namespaces 2\n",
        "urlseen_namespace_urls{namespace=\"jobs\",type=\"urlseen\"} 2\n",
        "urlseen_namespace_urls{namespace=\"bf\",type=\"MBbloom--\"} 1\n",
        "urlseen_namespace_fpr_bound{namespace=\"jobs\",type=\"urlseen\"} 0.01\n",
        "# TYPE urlseen_namespace_splits_total counter\n",
        "extra_source_metric 1\n",
    ] {
        assert!(body.contains(line), "no {line:?} in\n{body}");
    }
    assert!(body.contains("urlseen_namespace_memory_bytes{namespace=\"jobs\""), "{body}");
    assert!(body.contains("urlseen_namespace_estimated_fpr{namespace=\"jobs\""), "{body}");
    assert!(body.contains("urlseen_process_resident_memory_bytes "), "{body}");
}

#[tokio::test]
async fn seen_and_check_over_json() {
    let h = start(None).await;
    let body = r#"{"urls":["https://a.example/","/rel","HTTPS://A.EXAMPLE"]}"#;
    let (status, head, reply) =
        request(h.addr, "POST", "/v1/namespaces/jobs/seen", &[JSON], body).await;
    assert_eq!(status, 200, "{head}\n{reply}");
    assert!(head.contains("content-type: application/json"), "{head}");
    assert_eq!(
        reply,
        r#"{"seen":[false,null,true],"errors":[{"index":1,"error":"invalid URL: relative URL (no scheme such as \"https:\"): resolve it against the URL of the page it was found on before canonicalizing"}]}"#
    );
    let (_, _, reply) = request(
        h.addr,
        "POST",
        "/v1/namespaces/jobs/seen",
        &[JSON],
        r#"{"urls":["https://a.example/x"]}"#,
    )
    .await;
    assert_eq!(reply, r#"{"seen":[false]}"#);
    let (_, _, reply) = request(
        h.addr,
        "POST",
        "/v1/namespaces/jobs/check",
        &[JSON],
        r#"{"urls":["https://a.example/x","https://never.example/"]}"#,
    )
    .await;
    assert_eq!(reply, r#"{"seen":[true,false]}"#);
    // The same namespace over RESP.
    let mut c = h.resp.connect().await;
    c.expect(
        &["URL.CHECK", "jobs", "https://a.example/x", "https://never.example/"],
        b"*2\r\n:1\r\n:0\r\n",
    )
    .await;
    // Check on a namespace that does not exist creates nothing.
    let (status, _, reply) = request(
        h.addr,
        "POST",
        "/v1/namespaces/nope/check",
        &[JSON],
        r#"{"urls":["https://a.example/"]}"#,
    )
    .await;
    assert_eq!((status, reply.as_str()), (200, r#"{"seen":[false]}"#));
    let (status, _, reply) = request(h.addr, "GET", "/v1/namespaces", &[], "").await;
    assert_eq!((status, reply.as_str()), (200, r#"{"namespaces":["jobs"]}"#));
    let (status, _, reply) = request(h.addr, "GET", "/v1/namespaces/jobs", &[], "").await;
    assert_eq!(status, 200);
    let stats: serde_json::Value = serde_json::from_str(&reply).unwrap();
    assert_eq!(stats["count"], 2);
    assert_eq!(stats["type"], "urlseen");
    assert_eq!(stats["profile"], "crawler");
    assert!(stats.get("leaves").is_none());
    let (status, _, reply) = request(h.addr, "GET", "/v1/namespaces/nope", &[], "").await;
    assert_eq!((status, reply.as_str()), (404, r#"{"error":"not found"}"#));
}

#[tokio::test]
async fn bad_requests_get_json_errors() {
    let h = start(None).await;
    let (status, _, reply) =
        request(h.addr, "POST", "/v1/namespaces/jobs/seen", &[JSON], "{oops").await;
    assert_eq!(status, 400, "{reply}");
    assert!(reply.starts_with(r#"{"error":"#), "{reply}");
    let (status, _, reply) =
        request(h.addr, "POST", "/v1/namespaces/jobs/seen", &[JSON], r#"{"url":["x"]}"#).await;
    assert_eq!(status, 422, "{reply}");
    let (status, _, _) =
        request(h.addr, "POST", "/v1/namespaces/jobs/seen", &[], r#"{"urls":[]}"#).await;
    assert_eq!(status, 415);
    let (status, _, reply) = request(h.addr, "GET", "/nowhere", &[], "").await;
    assert_eq!((status, reply.as_str()), (404, r#"{"error":"no such route"}"#));
    let (status, _, _) = request(h.addr, "GET", "/v1/namespaces/jobs/seen", &[], "").await;
    assert_eq!(status, 405);
    // A namespace name the engine refuses.
    let (status, _, reply) = request(
        h.addr,
        "POST",
        "/v1/namespaces/a%01b/seen",
        &[JSON],
        r#"{"urls":["https://a.example/"]}"#,
    )
    .await;
    assert_eq!(status, 400, "{reply}");
    assert!(reply.contains("invalid namespace name"), "{reply}");
    // BF filters answer too: raw bytes, no canonicalization.
    let mut c = h.resp.connect().await;
    c.expect(&["BF.ADD", "bf", "/not-a-url"], b":1\r\n").await;
    let (_, _, reply) =
        request(h.addr, "POST", "/v1/namespaces/bf/check", &[JSON], r#"{"urls":["/not-a-url"]}"#)
            .await;
    assert_eq!(reply, r#"{"seen":[true]}"#);
}

#[tokio::test]
async fn a_password_protects_every_route() {
    let h = start(Some("s3cret")).await;
    // /metrics lists namespace names: it wants the password like the API, and so does /healthz.
    for path in ["/healthz", "/metrics", "/v1/namespaces"] {
        let (status, _, reply) = request(h.addr, "GET", path, &[], "").await;
        assert_eq!(status, 401, "{path}: {reply}");
        let (status, _, _) =
            request(h.addr, "GET", path, &[("Authorization", "Bearer s3cret")], "").await;
        assert_eq!(status, 200, "{path}");
    }
    let body = r#"{"urls":["https://a.example/"]}"#;
    let (status, _, reply) =
        request(h.addr, "POST", "/v1/namespaces/jobs/seen", &[JSON], body).await;
    assert_eq!(status, 401, "{reply}");
    let (status, _, _) = request(
        h.addr,
        "POST",
        "/v1/namespaces/jobs/seen",
        &[JSON, ("Authorization", "Bearer wrong")],
        body,
    )
    .await;
    assert_eq!(status, 401);
    let (status, _, reply) = request(
        h.addr,
        "POST",
        "/v1/namespaces/jobs/seen",
        &[JSON, ("Authorization", "Bearer s3cret")],
        body,
    )
    .await;
    assert_eq!((status, reply.as_str()), (200, r#"{"seen":[false]}"#));
    let (status, _, _) = request(h.addr, "GET", "/v1/namespaces", &[], "").await;
    assert_eq!(status, 401);
}

/// Protected mode: without a password, a peer beyond loopback gets 403 on every route, and
/// loopback peers are served.
#[tokio::test]
async fn protected_mode_serves_loopback_only() {
    let app = Arc::new(App::in_memory());
    let resp = common::TestServer::start_app(Config::default(), app.clone()).await;
    let listener = TcpListener::bind("0.0.0.0:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let state = HttpState::new(app.clone(), resp.metrics.clone());
    tokio::spawn(serve(listener, router(state), std::future::pending()));
    let outside = SocketAddr::new(common::TestServer::non_loopback_ip(), port);
    let body = r#"{"urls":["https://a.example/"]}"#;
    let (status, _, reply) =
        request(outside, "POST", "/v1/namespaces/jobs/seen", &[JSON], body).await;
    assert_eq!(status, 403, "{reply}");
    assert!(reply.contains("protected mode"), "{reply}");
    assert!(app.db().namespace_names().is_empty(), "a denied request wrote");
    let (status, _, _) = request(outside, "GET", "/metrics", &[], "").await;
    assert_eq!(status, 403);
    let local = SocketAddr::from(([127, 0, 0, 1], port));
    let (status, _, reply) =
        request(local, "POST", "/v1/namespaces/jobs/seen", &[JSON], body).await;
    assert_eq!((status, reply.as_str()), (200, r#"{"seen":[false]}"#));
}

#[tokio::test]
async fn graceful_shutdown() {
    let mut h = start(None).await;
    let (status, _, _) = request(h.addr, "GET", "/healthz", &[], "").await;
    assert_eq!(status, 200);
    let _ = h.stop.take().unwrap().send(());
    tokio::time::timeout(common::WAIT, &mut h.handle).await.unwrap().unwrap().unwrap();
    assert!(TcpStream::connect(h.addr).await.is_err());
}

/// `/metrics` has a Prometheus histogram per command: cumulative `_bucket`s with increasing
/// `le` ending at `+Inf`, whose last count is `_count`, and `_sum`.
#[tokio::test]
async fn per_command_latency_histograms() {
    let h = start(None).await;
    let mut c = h.resp.connect().await;
    for _ in 0..3 {
        c.expect(&["PING"], b"+PONG\r\n").await;
    }
    let (_, _, body) = request(h.addr, "GET", "/metrics", &[], "").await;
    let name = "urlseen_resp_command_duration_seconds";
    assert!(body.contains(&format!("# TYPE {name} histogram\n")), "{body}");
    let prefix = format!("{name}_bucket{{command=\"ping\",le=\"");
    let mut buckets: Vec<(f64, u64)> = Vec::new();
    for line in body.lines().filter_map(|l| l.strip_prefix(&prefix)) {
        let (le, count) = line.split_once("\"} ").unwrap();
        let le = if le == "+Inf" { f64::INFINITY } else { le.parse().unwrap() };
        buckets.push((le, count.parse().unwrap()));
    }
    assert!(buckets.len() > 2, "{body}");
    for pair in buckets.windows(2) {
        assert!(pair[0].0 < pair[1].0 && pair[0].1 <= pair[1].1, "{buckets:?}");
    }
    assert_eq!(buckets.last().unwrap(), &(f64::INFINITY, 3));
    assert!(body.contains(&format!("{name}_count{{command=\"ping\"}} 3\n")), "{body}");
    let sum_prefix = format!("{name}_sum{{command=\"ping\"}} ");
    let sum: f64 = body.lines().find_map(|l| l.strip_prefix(&sum_prefix)).unwrap().parse().unwrap();
    assert!((0.0..1.0).contains(&sum), "{sum}");
}
