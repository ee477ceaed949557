//! HTTP beside RESP: health, Prometheus metrics, and a small JSON API for curl users.
//!
//! | route | what |
//! |---|---|
//! | `GET /healthz` | `200 ok` while the server runs |
//! | `GET /metrics` | Prometheus text: RESP counters and per-command latency histograms, per-namespace gauges, process RSS, and any [`MetricsSource`] |
//! | `GET /v1/namespaces` | `{"namespaces":["jobs", …]}` |
//! | `GET /v1/namespaces/{ns}` | the namespace's statistics (`URL.INFO`'s fields), `404` if it does not exist |
//! | `POST /v1/namespaces/{ns}/seen` | `URL.SEEN`: body `{"urls":[…]}` → `{"seen":[…]}` |
//! | `POST /v1/namespaces/{ns}/check` | `URL.CHECK`, the same shapes, records nothing |
//!
//! ```text
//! $ curl -s localhost:8380/v1/namespaces/jobs/seen -d '{"urls":["https://a.example/","/rel","HTTPS://A.EXAMPLE"]}'
//! {"seen":[false,null,true],"errors":[{"index":1,"error":"invalid URL: relative URL …"}]}
//! ```
//!
//! `seen[i]` answers `urls[i]`: `true` seen before, `false` new (and now recorded), `null` when
//! the URL is invalid (neither looked up nor recorded), with the reason in `errors` (left out
//! when empty). As over RESP, a request refused as a whole recorded nothing: `{"error": …}`
//! with 503 when the server cannot write now (`maxmemory`, a failed disk write, Redis), 400
//! otherwise. A body that is not
//! that JSON gets `{"error": …}` with status 400 (bad JSON), 415 (no JSON content type) or 422
//! (wrong shape); bodies are limited to [`MAX_BODY`] bytes (413 past it). When the server has a
//! password (`requirepass`), every route (`/v1`, `/metrics`, `/healthz`) wants
//! `Authorization: Bearer <password>` (401 otherwise); without one, protected mode (on by
//! default) serves loopback peers only (403 otherwise). Batches run on tokio's blocking pool, so a
//! big one does not hold up the RESP connections.

use std::fmt::Write as _;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::Json;
use axum::Router;
use axum::extract::rejection::JsonRejection;
use axum::extract::{ConnectInfo, DefaultBodyLimit, Path, Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::{Deserialize, Serialize};
use tokio::net::TcpListener;

use crate::app::{App, KeyKind, rss_bytes};
use crate::error::CommandError;
use crate::metrics::Metrics;

/// The largest request body accepted, in bytes (16 MiB: about 100 000 URLs).
pub const MAX_BODY: usize = 16 << 20;

/// Something that appends Prometheus text to `/metrics` (the durable engine's fsync latency,
/// for one).
pub type MetricsSource = Arc<dyn Fn(&mut String) + Send + Sync>;

/// What the HTTP handlers share.
#[derive(Clone)]
pub struct HttpState {
    app: Arc<App>,
    metrics: Arc<Metrics>,
    password: Option<Arc<str>>,
    protected: bool,
    sources: Vec<MetricsSource>,
}

impl std::fmt::Debug for HttpState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpState")
            .field("password", &self.password.as_ref().map(|_| "…"))
            .field("sources", &self.sources.len())
            .finish_non_exhaustive()
    }
}

impl HttpState {
    /// Serves `app`, reporting `metrics` (the RESP server's: [`Dispatch::metrics`](crate::Dispatch::metrics)).
    pub fn new(app: Arc<App>, metrics: Arc<Metrics>) -> HttpState {
        HttpState { app, metrics, password: None, protected: true, sources: Vec::new() }
    }

    /// Requires `Authorization: Bearer <password>` on every route.
    pub fn requirepass(mut self, password: Option<String>) -> HttpState {
        self.password = password.map(Arc::from);
        self
    }

    /// Protected mode (default on): without a password, only loopback peers are served.
    pub fn protected_mode(mut self, on: bool) -> HttpState {
        self.protected = on;
        self
    }

    /// Adds a source of `/metrics` text.
    pub fn metrics_source(mut self, source: MetricsSource) -> HttpState {
        self.sources.push(source);
        self
    }
}

/// The routes, ready for [`serve`].
pub fn router(state: HttpState) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/metrics", get(metrics))
        .route("/v1/namespaces", get(list))
        .route("/v1/namespaces/{ns}", get(info))
        .route("/v1/namespaces/{ns}/seen", post(seen))
        .route("/v1/namespaces/{ns}/check", post(check))
        .fallback(|| async { error(StatusCode::NOT_FOUND, "no such route") })
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .layer(axum::middleware::from_fn_with_state(state.clone(), guard))
        .with_state(state)
}

/// Serves `router` on `listener` until `shutdown` completes, then stops accepting and waits for
/// the requests in flight.
///
/// # Errors
/// The listener's address cannot be read.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    tracing::info!(addr = %listener.local_addr()?, "HTTP server listening");
    let service = router.into_make_service_with_connect_info::<SocketAddr>();
    axum::serve(listener, service).with_graceful_shutdown(shutdown).await?;
    tracing::info!("HTTP server stopped");
    Ok(())
}

#[derive(Debug, Serialize)]
struct ErrorBody<'a> {
    error: &'a str,
}

fn error(status: StatusCode, message: &str) -> Response {
    (status, Json(ErrorBody { error: message })).into_response()
}

/// A command error as JSON text: without the `ERR ` code.
fn message(e: &CommandError) -> String {
    let text = e.to_string();
    match text.strip_prefix("ERR ") {
        Some(rest) => rest.to_owned(),
        None => text,
    }
}

/// In front of every route: with a password, the request must carry it
/// (`Authorization: Bearer <password>`, else 401); without one, in protected mode, only
/// loopback peers are served (else 403, as RESP's `-DENIED`).
async fn guard(State(state): State<HttpState>, request: Request, next: Next) -> Response {
    match &state.password {
        Some(password) => {
            let given = request
                .headers()
                .get(header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.strip_prefix("Bearer "));
            if given != Some(&**password) {
                if given.is_some() {
                    // A wrong guess waits, as over RESP.
                    tokio::time::sleep(crate::client::FAILED_AUTH_DELAY).await;
                }
                return error(
                    StatusCode::UNAUTHORIZED,
                    "authentication required: Authorization: Bearer <requirepass>",
                );
            }
        }
        None if state.protected => {
            // No peer address: the router was called in-process, not over a socket.
            let peer = request.extensions().get::<ConnectInfo<SocketAddr>>().map(|c| c.0.ip());
            if peer.is_some_and(|ip| !ip.to_canonical().is_loopback()) {
                return error(StatusCode::FORBIDDEN, crate::error::DENIED);
            }
        }
        None => {}
    }
    next.run(request).await
}

async fn healthz() -> &'static str {
    "ok\n"
}

async fn metrics(State(state): State<HttpState>) -> Response {
    let mut out = String::with_capacity(16 << 10);
    state.metrics.write_prometheus(&mut out);
    state.app.write_prometheus(&mut out);
    if let Some(rss) = rss_bytes() {
        let _ = writeln!(out, "# HELP urlseen_process_resident_memory_bytes Resident memory.");
        let _ = writeln!(out, "# TYPE urlseen_process_resident_memory_bytes gauge");
        let _ = writeln!(out, "urlseen_process_resident_memory_bytes {rss}");
    }
    // Extra series a host adds (per-namespace fsync figures come with the namespace gauges).
    for source in &state.sources {
        source(&mut out);
    }
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], out).into_response()
}

#[derive(Debug, Serialize)]
struct NamespaceList {
    namespaces: Vec<String>,
}

async fn list(State(state): State<HttpState>) -> Response {
    Json(NamespaceList { namespaces: state.app.db().namespace_names() }).into_response()
}

async fn info(State(state): State<HttpState>, Path(ns): Path<String>) -> Response {
    let Some(namespace) = state.app.namespace(ns.as_bytes()) else {
        return error(StatusCode::NOT_FOUND, "not found");
    };
    let stats = namespace.stats();
    let Ok(mut value) = serde_json::to_value(&stats) else {
        return error(StatusCode::INTERNAL_SERVER_ERROR, "statistics do not serialize");
    };
    if let Some(map) = value.as_object_mut() {
        // Every leaf would make this reply as big as the tree; URL.INFO's summary is enough.
        map.remove("leaves");
        map.insert("type".into(), KeyKind::of(&namespace).type_name().into());
        map.insert("capacity".into(), namespace.options().capacity.into());
    }
    Json(value).into_response()
}

/// The body of `seen` and `check`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct UrlsRequest {
    urls: Vec<String>,
}

/// The reply of `seen` and `check`.
#[derive(Debug, Serialize)]
struct SeenResponse {
    seen: Vec<Option<bool>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    errors: Vec<ItemError>,
}

#[derive(Debug, Serialize)]
struct ItemError {
    index: usize,
    error: String,
}

impl From<Vec<Result<bool, CommandError>>> for SeenResponse {
    fn from(answers: Vec<Result<bool, CommandError>>) -> Self {
        let mut errors = Vec::new();
        let seen = answers
            .into_iter()
            .enumerate()
            .map(|(index, answer)| match answer {
                Ok(seen) => Some(seen),
                Err(e) => {
                    errors.push(ItemError { index, error: message(&e) });
                    None
                }
            })
            .collect();
        SeenResponse { seen, errors }
    }
}

async fn seen(
    State(state): State<HttpState>,
    Path(ns): Path<String>,
    body: Result<Json<UrlsRequest>, JsonRejection>,
) -> Response {
    batch(state, ns, body, true).await
}

async fn check(
    State(state): State<HttpState>,
    Path(ns): Path<String>,
    body: Result<Json<UrlsRequest>, JsonRejection>,
) -> Response {
    batch(state, ns, body, false).await
}

/// The status of a batch refused as a whole (nothing of it recorded): 503 when the server
/// cannot write now (`maxmemory`, a failed disk write, the Redis backend), so that a client
/// retries later; 400 when the request itself is refused (the namespace name, a full
/// non-scaling filter).
fn batch_error_status(e: &CommandError) -> StatusCode {
    let text = e.to_string();
    let unavailable = ["OOM ", "MISCONF ", "ERR redis backend"];
    if unavailable.iter().any(|prefix| text.starts_with(prefix)) {
        StatusCode::SERVICE_UNAVAILABLE
    } else {
        StatusCode::BAD_REQUEST
    }
}

async fn batch(
    state: HttpState,
    ns: String,
    body: Result<Json<UrlsRequest>, JsonRejection>,
    write: bool,
) -> Response {
    let urls = match body {
        Ok(Json(request)) => request.urls,
        Err(rejection) => return error(rejection.status(), &rejection.body_text()),
    };
    let app = state.app.clone();
    let work = tokio::task::spawn_blocking(move || {
        // The path `URL.SEEN`/`URL.CHECK` take, wherever the namespaces live.
        let lookup = if write { crate::app::Lookup::Record } else { crate::app::Lookup::Check };
        let key = bytes::Bytes::from(ns.into_bytes());
        app.answer_urls(&key, &urls, lookup, &mut crate::app::NamespaceCache::default())
    });
    match work.await {
        Ok(Ok(answers)) => Json(SeenResponse::from(answers)).into_response(),
        Ok(Err(e)) => error(batch_error_status(&e), &message(&e)),
        Err(_) => error(StatusCode::INTERNAL_SERVER_ERROR, "the request failed"),
    }
}
