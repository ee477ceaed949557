//! Per-connection state ([`ConnState`]) and the registry of connected clients that
//! `CLIENT LIST` and `INFO` read.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU8, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::time::Instant;

use bytes::Bytes;
use parking_lot::Mutex;

use crate::frame::Protocol;
use crate::transaction::{Queue, Watches, Watching};

/// How long a connection waits before answering a wrong password: one guess per 200 ms per
/// connection, and the connection is busy meanwhile.
pub const FAILED_AUTH_DELAY: std::time::Duration = std::time::Duration::from_millis(200);

/// Work a command did that counts only once its reply is delivered (see
/// [`ConnState::defer_until_replied`]): a server's "new" answers, recorded only when the client
/// got them.
pub trait OnReply: Send + Sync + std::fmt::Debug {
    /// The replies were written and the client was still there: make it count. Returns how
    /// many "new" answers it delivered could not be recorded (a failed commit: counted in
    /// `INFO stats` `unrecorded_answers`).
    fn delivered(self: Box<Self>) -> u64;
}

/// The state of one connection, owned by its task and handed to every command it runs.
#[derive(Debug)]
pub struct ConnState {
    protocol: Protocol,
    authenticated: bool,
    close_after_reply: bool,
    /// A wrong password was given by the command just run: its reply is delayed.
    failed_auth: bool,
    info: Arc<ClientInfo>,
    /// Per-connection state of the application (the engine's namespace cache).
    extension: Option<Box<dyn std::any::Any + Send + Sync>>,
    /// The open transaction, between `MULTI` and `EXEC`/`DISCARD`.
    transaction: Option<Queue>,
    /// The keys `WATCH` registered, until `EXEC`, `DISCARD` or `UNWATCH`.
    watching: Option<Watching>,
    /// What counts once the replies written so far are delivered.
    on_reply: Vec<Box<dyn OnReply>>,
}

impl ConnState {
    /// The state of a new connection: RESP2, authenticated unless a password is required.
    pub fn new(info: Arc<ClientInfo>, authenticated: bool) -> ConnState {
        ConnState {
            protocol: Protocol::Resp2,
            authenticated,
            close_after_reply: false,
            failed_auth: false,
            info,
            extension: None,
            transaction: None,
            watching: None,
            on_reply: Vec::new(),
        }
    }

    /// Whether a transaction is open (`MULTI` was called, `EXEC`/`DISCARD` not yet).
    pub fn in_multi(&self) -> bool {
        self.transaction.is_some()
    }

    /// Opens a transaction; `false` if one is open already.
    pub(crate) fn begin_multi(&mut self) -> bool {
        if self.transaction.is_some() {
            return false;
        }
        self.transaction = Some(Queue::default());
        self.info.multi.store(0, Relaxed);
        true
    }

    /// Queues a request in the open transaction.
    pub(crate) fn queue(&mut self, argv: Vec<Bytes>) {
        if let Some(queue) = &mut self.transaction {
            let bytes: usize = argv.iter().map(Bytes::len).sum();
            self.info.buffers.multi_mem.fetch_add(bytes as u64, Relaxed);
            queue.commands.push(argv);
            self.info.multi.store(i64::try_from(queue.len()).unwrap_or(i64::MAX), Relaxed);
        }
    }

    /// A command was refused while queueing: the open transaction, if any, can only abort.
    pub(crate) fn abort_multi(&mut self) {
        if let Some(queue) = &mut self.transaction {
            queue.aborted = true;
        }
    }

    /// Closes the open transaction and returns it.
    pub(crate) fn take_multi(&mut self) -> Option<Queue> {
        self.info.multi.store(-1, Relaxed);
        self.info.buffers.multi_mem.store(0, Relaxed);
        self.transaction.take()
    }

    /// Watches `key` for the next `EXEC`.
    pub(crate) fn watch(&mut self, watches: &Arc<Watches>, key: Bytes) {
        let watching = self.watching.get_or_insert_with(|| Watching::new(watches.clone()));
        watching.add(key);
        self.info.watch.store(watching.len(), Relaxed);
    }

    /// Forgets the watched keys; whether one of them was written since it was watched.
    pub(crate) fn unwatch(&mut self) -> bool {
        self.info.watch.store(0, Relaxed);
        self.watching.take().is_some_and(|w| w.is_dirty())
    }

    /// Marks that the command being run was given a wrong password: the connection delays its
    /// reply by [`FAILED_AUTH_DELAY`], so that guessing passwords is slow.
    pub fn note_failed_auth(&mut self) {
        self.failed_auth = true;
    }

    /// Makes `work` count only once the reply of the command being run is delivered: the
    /// connection calls [`OnReply::delivered`] after it wrote the replies, unless the client
    /// had left, and drops `work` otherwise (the write failed, the client closed before its
    /// replies were written or reset the connection after: see `server::deliver`).
    pub fn defer_until_replied(&mut self, work: Box<dyn OnReply>) {
        self.on_reply.push(work);
    }

    /// [`Self::defer_until_replied`] for each of `work`.
    pub fn defer_all_until_replied(&mut self, work: Vec<Box<dyn OnReply>>) {
        self.on_reply.extend(work);
    }

    /// Whether work waits for the replies written so far.
    pub(crate) fn awaits_delivery(&self) -> bool {
        !self.on_reply.is_empty()
    }

    /// The work waiting for the replies written so far.
    pub(crate) fn take_on_reply(&mut self) -> Vec<Box<dyn OnReply>> {
        std::mem::take(&mut self.on_reply)
    }

    /// Whether the last command was given a wrong password (and forgets it).
    pub(crate) fn take_failed_auth(&mut self) -> bool {
        std::mem::take(&mut self.failed_auth)
    }

    /// The client id (`CLIENT ID`), unique for the life of the server.
    pub fn id(&self) -> u64 {
        self.info.id
    }

    /// The protocol replies are written in.
    pub fn protocol(&self) -> Protocol {
        self.protocol
    }

    /// Switches the protocol replies are written in (from the next reply on).
    pub fn set_protocol(&mut self, protocol: Protocol) {
        self.protocol = protocol;
        self.info.resp.store(protocol.version() as u8, Relaxed);
    }

    /// Whether the client may run commands that need authentication.
    pub fn is_authenticated(&self) -> bool {
        self.authenticated
    }

    /// Marks the client authenticated (after a successful `AUTH`).
    pub fn set_authenticated(&mut self, authenticated: bool) {
        self.authenticated = authenticated;
    }

    /// The name set by `CLIENT SETNAME` / `HELLO … SETNAME`.
    pub fn name(&self) -> Option<Bytes> {
        self.info.meta.lock().name.clone()
    }

    /// Sets (or, with `None` or an empty name, clears) the client name.
    pub fn set_name(&mut self, name: Option<Bytes>) {
        self.info.meta.lock().name = name.filter(|n| !n.is_empty());
    }

    /// Sets the library name reported by `CLIENT SETINFO LIB-NAME`.
    pub fn set_lib_name(&mut self, v: Option<Bytes>) {
        self.info.meta.lock().lib_name = v.filter(|n| !n.is_empty());
    }

    /// Sets the library version reported by `CLIENT SETINFO LIB-VER`.
    pub fn set_lib_ver(&mut self, v: Option<Bytes>) {
        self.info.meta.lock().lib_ver = v.filter(|n| !n.is_empty());
    }

    /// The peer address.
    pub fn peer_addr(&self) -> Option<SocketAddr> {
        self.info.peer
    }

    /// The local address the client connected to.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.info.local
    }

    /// Asks the connection to close once the reply to the current command is written (`QUIT`).
    pub fn close_after_reply(&mut self) {
        self.close_after_reply = true;
    }

    /// Whether [`ConnState::close_after_reply`] was called.
    pub fn closing(&self) -> bool {
        self.close_after_reply
    }

    /// The application's per-connection state of type `T`, created with `T::default()` on
    /// first use (or when a value of another type was stored).
    pub fn extension<T: Default + Send + Sync + 'static>(&mut self) -> &mut T {
        if !self.extension.as_ref().is_some_and(|e| e.is::<T>()) {
            self.extension = Some(Box::new(T::default()));
        }
        match self.extension.as_mut().and_then(|e| e.downcast_mut::<T>()) {
            Some(t) => t,
            None => unreachable!("the extension was just set to a T"),
        }
    }

    /// The entry of this client in the registry.
    pub fn info(&self) -> &Arc<ClientInfo> {
        &self.info
    }
}

/// What `CLIENT LIST` shows of a connection; shared between its task and the registry.
#[derive(Debug)]
pub struct ClientInfo {
    id: u64,
    peer: Option<SocketAddr>,
    local: Option<SocketAddr>,
    created: Instant,
    /// Milliseconds since `created` at the last read from the client.
    last_interaction_ms: AtomicU64,
    /// Index of the last command in the dispatch table, `usize::MAX` for none.
    last_command: AtomicUsize,
    resp: AtomicU8,
    /// Commands queued in the open transaction, -1 outside one (`CLIENT LIST`'s `multi=`).
    multi: AtomicI64,
    /// Keys watched (`watch=`).
    watch: AtomicUsize,
    /// The socket's file descriptor, -1 where there is none.
    fd: AtomicI64,
    /// Buffers, as of the last time the connection waited for the client (see
    /// [`ClientInfo::set_buffers`]).
    buffers: Buffers,
    meta: Mutex<ClientMeta>,
}

/// What `CLIENT LIST` says of a client's buffers.
#[derive(Debug, Default)]
struct Buffers {
    qbuf: AtomicU64,
    qbuf_free: AtomicU64,
    multi_mem: AtomicU64,
    rbs: AtomicU64,
    rbp: AtomicU64,
    obl: AtomicU64,
}

#[derive(Debug, Default)]
struct ClientMeta {
    name: Option<Bytes>,
    lib_name: Option<Bytes>,
    lib_ver: Option<Bytes>,
}

impl ClientInfo {
    /// A new client entry.
    pub fn new(id: u64, peer: Option<SocketAddr>, local: Option<SocketAddr>) -> ClientInfo {
        ClientInfo {
            id,
            peer,
            local,
            created: Instant::now(),
            last_interaction_ms: AtomicU64::new(0),
            last_command: AtomicUsize::new(usize::MAX),
            resp: AtomicU8::new(2),
            multi: AtomicI64::new(-1),
            watch: AtomicUsize::new(0),
            fd: AtomicI64::new(-1),
            buffers: Buffers::default(),
            meta: Mutex::new(ClientMeta::default()),
        }
    }

    /// The client id.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Sets the socket's file descriptor (`fd=`).
    pub(crate) fn set_fd(&self, fd: i64) {
        self.fd.store(fd, Relaxed);
    }

    /// Records the connection's buffers: bytes of request not executed (`qbuf`), free room in
    /// the input buffer (`qbuf-free`), the output buffer's capacity (`rbs`, and its peak `rbp`)
    /// and the reply bytes not yet written (`obl`).
    pub(crate) fn set_buffers(&self, qbuf: usize, qbuf_free: usize, rbs: usize, obl: usize) {
        let b = &self.buffers;
        b.qbuf.store(qbuf as u64, Relaxed);
        b.qbuf_free.store(qbuf_free as u64, Relaxed);
        b.rbs.store(rbs as u64, Relaxed);
        b.rbp.fetch_max(obl as u64, Relaxed);
        b.obl.store(obl as u64, Relaxed);
    }

    pub(crate) fn touch(&self) {
        let ms = u64::try_from(self.created.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_interaction_ms.store(ms, Relaxed);
    }

    pub(crate) fn set_last_command(&self, index: usize) {
        self.last_command.store(index, Relaxed);
    }

    pub(crate) fn last_command(&self) -> Option<usize> {
        Some(self.last_command.load(Relaxed)).filter(|&i| i != usize::MAX)
    }

    /// The `CLIENT LIST` line (without the trailing newline), Redis' field order; `cmd` is the
    /// full name of the last command.
    pub(crate) fn list_line(&self, cmd: &str) -> Vec<u8> {
        let age = self.created.elapsed().as_secs();
        let idle_ms = u64::try_from(self.created.elapsed().as_millis())
            .unwrap_or(u64::MAX)
            .saturating_sub(self.last_interaction_ms.load(Relaxed));
        let addr = |a: Option<SocketAddr>| a.map_or_else(|| "?:0".to_owned(), |a| a.to_string());
        let multi = self.multi.load(Relaxed);
        let flags = if multi >= 0 { "x" } else { "N" };
        let meta = self.meta.lock();
        let b = &self.buffers;
        let (qbuf, qbuf_free) = (b.qbuf.load(Relaxed), b.qbuf_free.load(Relaxed));
        let (rbs, multi_mem) = (b.rbs.load(Relaxed), b.multi_mem.load(Relaxed));
        let mut line = format!(
            "id={} addr={} laddr={} fd={} name=",
            self.id,
            addr(self.peer),
            addr(self.local),
            self.fd.load(Relaxed)
        )
        .into_bytes();
        line.extend_from_slice(meta.name.as_deref().unwrap_or_default());
        line.extend_from_slice(
            format!(
                " age={age} idle={} flags={flags} db=0 sub=0 psub=0 ssub=0 multi={multi} watch={} \
                 qbuf={qbuf} qbuf-free={qbuf_free} argv-mem=0 multi-mem={multi_mem} rbs={rbs} \
                 rbp={} obl={} oll=0 omem=0 tot-mem={} events=r cmd={cmd} user=default \
                 redir=-1 resp={} lib-name=",
                idle_ms / 1000,
                self.watch.load(Relaxed),
                b.rbp.load(Relaxed),
                b.obl.load(Relaxed),
                qbuf + qbuf_free + rbs + multi_mem,
                self.resp.load(Relaxed)
            )
            .as_bytes(),
        );
        line.extend_from_slice(meta.lib_name.as_deref().unwrap_or_default());
        line.extend_from_slice(b" lib-ver=");
        line.extend_from_slice(meta.lib_ver.as_deref().unwrap_or_default());
        line
    }
}

/// The connected clients, by id.
#[derive(Debug, Default)]
pub struct ClientRegistry {
    clients: Mutex<BTreeMap<u64, Arc<ClientInfo>>>,
}

impl ClientRegistry {
    /// Adds a client; the returned guard removes it when dropped.
    pub(crate) fn register(self: &Arc<Self>, info: Arc<ClientInfo>) -> Registered {
        self.clients.lock().insert(info.id, info.clone());
        Registered { registry: self.clone(), id: info.id }
    }

    /// The connected clients, by ascending id.
    pub fn snapshot(&self) -> Vec<Arc<ClientInfo>> {
        self.clients.lock().values().cloned().collect()
    }

    /// How many clients are connected.
    pub fn len(&self) -> usize {
        self.clients.lock().len()
    }

    /// Whether no client is connected.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Removes a client from the registry when its connection ends.
#[derive(Debug)]
pub(crate) struct Registered {
    registry: Arc<ClientRegistry>,
    id: u64,
}

impl Drop for Registered {
    fn drop(&mut self) {
        self.registry.clients.lock().remove(&self.id);
    }
}
