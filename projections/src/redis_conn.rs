//! One Redis handle for the read model and the hold limit, whether `REDIS_URL` names a
//! single server or the nodes of a Redis Cluster (several comma-separated URLs).
//!
//! Both kinds answer every single-key command the same way, so the callers' commands do
//! not change; what differs is what may share a round trip. A single server takes any
//! pipeline; a cluster takes a pipeline only when all its keys hash to one slot. So
//! whatever spans keys is written as [`Parts`] (each part keeps to one slot: the hash
//! tags of `availability::Keys` put a hotel's keys, and a generation's `current` and
//! `meta`, in one slot each) and [`RedisConn::query_parts`] sends them as one pipeline
//! to a single server (one round trip, as before the cluster) and concurrently to a
//! cluster: reads as one pipeline per master serving their slots (a pipeline that is
//! not a transaction may span the slots of one node), a transaction's parts one per
//! slot. One round trip of latency either way.
//!
//! Both connect lazily and fail fast, so a Redis outage (or a cluster failing over)
//! costs readers a fallback to PostgreSQL, not a hang, and the server starts without it.

use std::sync::{Arc, PoisonError};
use std::time::Duration;

use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster::{ClusterClient, ClusterClientBuilder, ClusterConfig};
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
use redis::{Cmd, Pipeline, RedisFuture, RedisResult, Value};
use tokio::sync::OnceCell;

/// How long a connection attempt and a reply may take before the caller gives up.
const TIMEOUT: Duration = Duration::from_millis(250);

/// How long any request to a cluster may take, retries included (a `WAIT` for the
/// replicas among them): while a master fails over, a request for its slots can wait
/// on a connection that will never answer.
const CLUSTER_TIMEOUT: Duration = Duration::from_secs(2);

async fn bounded<T>(request: impl std::future::Future<Output = RedisResult<T>>) -> RedisResult<T> {
    match tokio::time::timeout(CLUSTER_TIMEOUT, request).await {
        Ok(reply) => reply,
        Err(_) => Err(redis::RedisError::from((
            redis::ErrorKind::Io,
            "the cluster did not answer in time",
        ))),
    }
}

/// A connection to a single Redis or to a Redis Cluster (cheap to clone: clones share
/// the connection).
#[derive(Clone)]
pub enum RedisConn {
    Single(ConnectionManager),
    Cluster(Cluster),
}

/// A Redis Cluster's connection, made on first use (and tried again on the next use
/// while no node answers), and made anew after a request fails: a connection that saw
/// a master die can keep waiting on it after the cluster has promoted its replica, and
/// a fresh one learns the cluster as it is now.
#[derive(Clone)]
pub struct Cluster {
    client: Arc<ClusterClient>,
    connection: Arc<std::sync::Mutex<Arc<OnceCell<ClusterConnection>>>>,
    /// Which master serves which slots, as `CLUSTER SLOTS` last said: reads are grouped
    /// by node with it (see [`RedisConn::query_parts`]). Forgotten with the connection.
    slots: Arc<std::sync::Mutex<Option<Arc<SlotMap>>>>,
}

/// Slot ranges and the master serving each: `(first, last, host, port)`, by `first`.
#[derive(Debug, Default)]
struct SlotMap(Vec<(u16, u16, String, u16)>);

impl SlotMap {
    fn node(&self, slot: u16) -> Option<(&str, u16)> {
        let at = self.0.partition_point(|(first, ..)| *first <= slot);
        let (first, last, host, port) = self.0.get(at.checked_sub(1)?)?;
        (*first <= slot && slot <= *last).then_some((host.as_str(), *port))
    }

    /// `CLUSTER SLOTS`: `[[first, last, [host, port, id, ...], replicas...], ...]`.
    fn parse(reply: Value) -> Option<Self> {
        let Value::Array(ranges) = reply else {
            return None;
        };
        let mut map = Vec::with_capacity(ranges.len());
        for range in ranges {
            let Value::Array(fields) = range else {
                return None;
            };
            let mut fields = fields.into_iter();
            let (Some(Value::Int(first)), Some(Value::Int(last)), Some(Value::Array(master))) =
                (fields.next(), fields.next(), fields.next())
            else {
                return None;
            };
            let mut master = master.into_iter();
            let host = match master.next()? {
                Value::BulkString(bytes) => String::from_utf8(bytes).ok()?,
                Value::SimpleString(text) => text,
                _ => return None,
            };
            let Some(Value::Int(port)) = master.next() else {
                return None;
            };
            map.push((
                u16::try_from(first).ok()?,
                u16::try_from(last).ok()?,
                host,
                u16::try_from(port).ok()?,
            ));
        }
        map.sort_unstable_by_key(|(first, ..)| *first);
        Some(Self(map))
    }
}

/// The slot of `key` in a Redis Cluster: CRC16 (XMODEM) of its hash tag (the text
/// between the first `{` and the next `}`, when not empty) or of the whole key, modulo
/// 16384, as the cluster specification defines it.
pub fn slot(key: &[u8]) -> u16 {
    let tagged = key.iter().position(|b| *b == b'{').and_then(|open| {
        let rest = key.get(open + 1..)?;
        let len = rest.iter().position(|b| *b == b'}')?;
        (len > 0).then(|| rest.get(..len)).flatten()
    });
    let mut crc: u16 = 0;
    for byte in tagged.unwrap_or(key) {
        crc ^= u16::from(*byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc % 16384
}

/// The key of a command whose first argument after its name is its key (every command
/// the model and the hold limit send in a part).
fn first_key(command: &Cmd) -> Option<&[u8]> {
    match command.args_iter().nth(1)? {
        redis::Arg::Simple(key) => Some(key),
        _ => None,
    }
}

impl Cluster {
    fn cell(&self) -> Arc<OnceCell<ClusterConnection>> {
        Arc::clone(
            &self
                .connection
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        )
    }

    async fn connection(
        &self,
    ) -> RedisResult<(Arc<OnceCell<ClusterConnection>>, ClusterConnection)> {
        let cell = self.cell();
        let connection = cell
            .get_or_try_init(|| {
                let config = ClusterConfig::new()
                    .set_connection_timeout(TIMEOUT)
                    .set_response_timeout(TIMEOUT);
                bounded(self.client.get_async_connection_with_config(config))
            })
            .await?
            .clone();
        Ok((cell, connection))
    }

    /// The slot map, asked of the cluster when not known.
    async fn slot_map(&self) -> RedisResult<Arc<SlotMap>> {
        if let Some(map) = self
            .slots
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
        {
            return Ok(map);
        }
        let reply = self
            .send(|mut connection| async move {
                connection
                    .route_command(
                        redis::cmd("CLUSTER").arg("SLOTS").clone(),
                        RoutingInfo::SingleNode(SingleNodeRoutingInfo::Random),
                    )
                    .await
            })
            .await?;
        let map = Arc::new(SlotMap::parse(reply).ok_or_else(|| {
            redis::RedisError::from((redis::ErrorKind::Parse, "unreadable CLUSTER SLOTS"))
        })?);
        *self.slots.lock().unwrap_or_else(PoisonError::into_inner) = Some(Arc::clone(&map));
        Ok(map)
    }

    /// Reads (no transaction) grouped by the node serving their slots: one pipeline a
    /// node, so a city search's fifty hotels cost a request per master, not one per
    /// bucket. A node's pipeline may span its slots since it is not a transaction. A
    /// reply that says a slot moved (the map is stale: a failover, a resharding)
    /// fails the read, and the map and the connection are made anew for the next.
    async fn read_by_node(&self, parts: Parts) -> RedisResult<Vec<Value>> {
        let map = self.slot_map().await?;
        let mut nodes: Vec<((String, u16), Pipeline, Vec<usize>)> = Vec::new();
        let mut index = 0;
        for part in &parts.parts {
            let node = part
                .cmd_iter()
                .next()
                .and_then(first_key)
                .and_then(|key| map.node(slot(key)))
                .map(|(host, port)| (host.to_owned(), port))
                .ok_or_else(|| {
                    redis::RedisError::from((
                        redis::ErrorKind::Client,
                        "a part without a served slot",
                    ))
                })?;
            let at = match nodes.iter().position(|(n, ..)| *n == node) {
                Some(at) => at,
                None => {
                    nodes.push((node, redis::pipe(), Vec::new()));
                    nodes.len() - 1
                }
            };
            let Some((_, pipe, indexes)) = nodes.get_mut(at) else {
                continue;
            };
            for command in part.cmd_iter() {
                pipe.add_command(command.clone());
                indexes.push(index);
                index += 1;
            }
        }
        let replies = self
            .send(|connection| {
                let sent = nodes.into_iter().map(|((host, port), pipe, indexes)| {
                    let mut connection = connection.clone();
                    async move {
                        let count = pipe.len();
                        let route = SingleNodeRoutingInfo::ByAddress { host, port };
                        let values = connection.route_pipeline(pipe, 0, count, route).await?;
                        if let Some(moved) = values.iter().find_map(|value| match value {
                            Value::ServerError(error)
                                if matches!(
                                    error.kind(),
                                    Some(
                                        redis::ServerErrorKind::Moved
                                            | redis::ServerErrorKind::Ask
                                            | redis::ServerErrorKind::TryAgain
                                            | redis::ServerErrorKind::ClusterDown
                                    )
                                ) =>
                            {
                                Some(error.clone())
                            }
                            _ => None,
                        }) {
                            return Err(redis::RedisError::from(moved));
                        }
                        Ok::<_, redis::RedisError>(indexes.into_iter().zip(values))
                    }
                });
                futures::future::try_join_all(sent)
            })
            .await?;
        let mut ordered: Vec<Value> = vec![Value::Nil; index];
        for (at, value) in replies.into_iter().flatten() {
            if let Some(slot) = ordered.get_mut(at) {
                *slot = value;
            }
        }
        Ok(ordered)
    }

    /// Sends `request` on the connection; when it fails, the connection it used is
    /// dropped (unless another failure already replaced it).
    async fn send<T, F>(&self, request: impl FnOnce(ClusterConnection) -> F) -> RedisResult<T>
    where
        F: std::future::Future<Output = RedisResult<T>>,
    {
        let (cell, connection) = self.connection().await?;
        let reply = bounded(request(connection)).await;
        if reply.as_ref().is_err_and(connection_may_be_stale) {
            let mut current = self
                .connection
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if Arc::ptr_eq(&current, &cell) {
                *current = Arc::new(OnceCell::new());
                *self.slots.lock().unwrap_or_else(PoisonError::into_inner) = None;
            }
        }
        reply
    }
}

/// Whether a failed request says the connection may no longer see the cluster as it is
/// (a node gone, a slot moved, a timeout), rather than that the command itself was
/// refused (a script not loaded yet, which the caller answers by sending it, a wrong
/// type, a syntax error): only then is the connection made anew.
fn connection_may_be_stale(error: &redis::RedisError) -> bool {
    use redis::{ErrorKind, ServerErrorKind};
    !matches!(
        error.kind(),
        ErrorKind::Server(ServerErrorKind::NoScript | ServerErrorKind::ResponseError)
    )
}

/// Connects to `url`: one URL is a single server, several comma-separated URLs are
/// nodes of one Redis Cluster (any of them; the client learns the rest).
pub fn connect(url: &str) -> anyhow::Result<RedisConn> {
    let nodes: Vec<&str> = url
        .split(',')
        .map(str::trim)
        .filter(|node| !node.is_empty())
        .collect();
    match nodes.as_slice() {
        [] => anyhow::bail!("REDIS_URL is empty"),
        [single] => {
            let client = redis::Client::open(*single)?;
            let config = ConnectionManagerConfig::new()
                .set_connection_timeout(Some(TIMEOUT))
                .set_response_timeout(Some(TIMEOUT))
                .set_number_of_retries(1)
                .set_max_delay(Duration::from_millis(100));
            Ok(RedisConn::Single(ConnectionManager::new_lazy_with_config(
                client, config,
            )?))
        }
        several => {
            // One retry, soon: while a master fails over, a read answered from
            // PostgreSQL at once beats one that waits for the cluster to settle.
            let client = ClusterClientBuilder::new(several.to_vec())
                .retries(1)
                .min_retry_wait(10)
                .max_retry_wait(100)
                .build()?;
            Ok(RedisConn::Cluster(Cluster {
                client: Arc::new(client),
                connection: Arc::new(std::sync::Mutex::new(Arc::new(OnceCell::new()))),
                slots: Arc::new(std::sync::Mutex::new(None)),
            }))
        }
    }
}

/// Pipelines that each keep to one hash slot, sent together (see the module's doc).
#[derive(Default)]
pub struct Parts {
    parts: Vec<Pipeline>,
}

impl Parts {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a part; its commands' keys must hash to one slot.
    pub fn push(&mut self, part: Pipeline) {
        if !part.is_empty() {
            self.parts.push(part);
        }
    }

    /// Adds every part of `other`, after these.
    pub fn extend(&mut self, other: Parts) {
        self.parts.extend(other.parts);
    }

    pub fn is_empty(&self) -> bool {
        self.parts.is_empty()
    }

    /// The number of replies the parts expect, in all.
    pub fn len(&self) -> usize {
        self.parts.iter().map(Pipeline::len).sum()
    }
}

impl RedisConn {
    pub fn is_cluster(&self) -> bool {
        matches!(self, RedisConn::Cluster(_))
    }

    /// Sends `parts` and answers every command's reply, in the order the parts and
    /// their commands were added. On a single server the parts travel as one pipeline,
    /// a transaction when `atomic`; on a cluster, reads go as one pipeline per node
    /// serving their slots, and a transaction's parts each on its own, all at once.
    pub async fn query_parts(&mut self, parts: Parts, atomic: bool) -> RedisResult<Vec<Value>> {
        match self {
            RedisConn::Single(connection) => {
                let mut all = redis::pipe();
                if atomic {
                    all.atomic();
                }
                for part in &parts.parts {
                    for command in part.cmd_iter() {
                        all.add_command(command.clone());
                    }
                }
                if all.is_empty() {
                    return Ok(Vec::new());
                }
                all.query_async(connection).await
            }
            RedisConn::Cluster(cluster) if !atomic => cluster.read_by_node(parts).await,
            RedisConn::Cluster(cluster) => {
                let replies = cluster
                    .send(|connection| {
                        let sent = parts.parts.into_iter().map(|mut part| {
                            let mut connection = connection.clone();
                            async move {
                                part.atomic()
                                    .query_async::<Vec<Value>>(&mut connection)
                                    .await
                            }
                        });
                        futures::future::try_join_all(sent)
                    })
                    .await?;
                Ok(replies.into_iter().flatten().collect())
            }
        }
    }

    /// Every key matching `pattern`, on every master of a cluster.
    pub async fn scan_keys(&mut self, pattern: &str) -> RedisResult<Vec<String>> {
        match self {
            RedisConn::Single(connection) => {
                let mut keys = Vec::new();
                let mut iter: redis::AsyncIter<'_, String> =
                    redis::AsyncCommands::scan_match(connection, pattern).await?;
                while let Some(key) = futures::StreamExt::next(&mut iter).await {
                    keys.push(key?);
                }
                Ok(keys)
            }
            RedisConn::Cluster(cluster) => {
                let (_, mut connection) = cluster.connection().await?;
                let mut keys = Vec::new();
                for (host, port) in masters(&mut connection).await? {
                    let mut cursor: u64 = 0;
                    loop {
                        let mut scan = redis::cmd("SCAN");
                        scan.arg(cursor)
                            .arg("MATCH")
                            .arg(pattern)
                            .arg("COUNT")
                            .arg(1000);
                        let route = RoutingInfo::SingleNode(SingleNodeRoutingInfo::ByAddress {
                            host: host.clone(),
                            port,
                        });
                        let reply = bounded(connection.route_command(scan, route)).await?;
                        let (next, page): (u64, Vec<String>) = redis::from_redis_value(reply)?;
                        keys.extend(page);
                        if next == 0 {
                            break;
                        }
                        cursor = next;
                    }
                }
                Ok(keys)
            }
        }
    }

    /// The fewest replicas that every master of a cluster has, at most `cap`: what a
    /// write may wait to be copied to (`WAIT`). Zero on a single server.
    pub async fn replicas_per_master(&mut self, cap: usize) -> RedisResult<usize> {
        let RedisConn::Cluster(cluster) = self else {
            return Ok(0);
        };
        let (_, mut connection) = cluster.connection().await?;
        let nodes = cluster_nodes(&mut connection).await?;
        let fewest = nodes
            .iter()
            .filter(|node| node.master && node.healthy)
            .map(|master| {
                nodes
                    .iter()
                    .filter(|n| n.healthy && n.master_id.as_deref() == Some(&master.id))
                    .count()
            })
            .min()
            .unwrap_or(0);
        Ok(fewest.min(cap))
    }
}

/// One line of `CLUSTER NODES`, as far as it matters here.
struct Node {
    id: String,
    host: String,
    port: u16,
    master: bool,
    healthy: bool,
    /// The master a replica copies.
    master_id: Option<String>,
}

async fn cluster_nodes(connection: &mut ClusterConnection) -> RedisResult<Vec<Node>> {
    let reply = bounded(connection.route_command(
        redis::cmd("CLUSTER").arg("NODES").clone(),
        RoutingInfo::SingleNode(SingleNodeRoutingInfo::Random),
    ))
    .await?;
    let text: String = redis::from_redis_value(reply)?;
    Ok(text.lines().filter_map(parse_node).collect())
}

/// `<id> <ip:port@cport[,hostname]> <flags> <master id or -> ...`
fn parse_node(line: &str) -> Option<Node> {
    let mut fields = line.split_whitespace();
    let id = fields.next()?.to_owned();
    let address = fields.next()?;
    let flags = fields.next()?;
    let master_id = fields.next()?;
    let (host, rest) = address.rsplit_once(':')?;
    let port = rest.split(['@', ',']).next()?.parse().ok()?;
    let flags: Vec<&str> = flags.split(',').collect();
    let healthy = !flags
        .iter()
        .any(|f| matches!(*f, "fail" | "fail?" | "handshake" | "noaddr"));
    Some(Node {
        id,
        host: host.to_owned(),
        port,
        master: flags.contains(&"master"),
        healthy,
        master_id: (master_id != "-").then(|| master_id.to_owned()),
    })
}

/// The healthy masters' addresses.
async fn masters(connection: &mut ClusterConnection) -> RedisResult<Vec<(String, u16)>> {
    Ok(cluster_nodes(connection)
        .await?
        .into_iter()
        .filter(|node| node.master && node.healthy)
        .map(|node| (node.host, node.port))
        .collect())
}

impl ConnectionLike for RedisConn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            RedisConn::Single(connection) => connection.req_packed_command(cmd),
            RedisConn::Cluster(cluster) => Box::pin(async move {
                cluster
                    .send(|mut connection| async move { connection.req_packed_command(cmd).await })
                    .await
            }),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            RedisConn::Single(connection) => {
                connection.req_packed_commands(pipeline, offset, count)
            }
            RedisConn::Cluster(cluster) => Box::pin(async move {
                cluster
                    .send(|mut connection| async move {
                        connection
                            .req_packed_commands(pipeline, offset, count)
                            .await
                    })
                    .await
            }),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            RedisConn::Single(connection) => connection.get_db(),
            RedisConn::Cluster(_) => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_nodes_lines_are_read_for_masters_and_their_replicas() {
        let text = "\
07c3 127.0.0.1:30004@40004 slave e7d1 0 1426238317239 4 connected
67ed 127.0.0.1:30002@40002 master - 0 1426238316232 2 connected 5461-10922
e7d1 127.0.0.1:30001@40001,node-1 myself,master - 0 0 1 connected 0-5460
6ec2 127.0.0.1:30005@40005 master,fail - 1426238316232 1426238316232 5 disconnected";
        let nodes: Vec<Node> = text.lines().filter_map(parse_node).collect();

        assert_eq!(nodes.len(), 4);
        assert_eq!(nodes[0].master_id.as_deref(), Some("e7d1"));
        assert!(!nodes[0].master && nodes[0].healthy);
        assert_eq!(
            (nodes[2].host.as_str(), nodes[2].port),
            ("127.0.0.1", 30001)
        );
        assert!(nodes[2].master && nodes[2].healthy);
        assert!(!nodes[3].healthy);
    }

    #[test]
    fn slots_follow_the_cluster_specification_and_its_hash_tags() {
        assert_eq!(slot(b"123456789"), 0x31C3);
        assert_eq!(slot(b"user:{1000}:a"), slot(b"{1000}"));
        assert_eq!(slot(b"{a}{b}"), slot(b"a"));
    }

    #[test]
    fn the_slot_map_names_the_master_of_every_served_slot() {
        let node = |host: &str, port: i64| {
            Value::Array(vec![
                Value::BulkString(host.as_bytes().to_vec()),
                Value::Int(port),
                Value::BulkString(b"id".to_vec()),
            ])
        };
        let range = |first: i64, last: i64, port: i64| {
            Value::Array(vec![
                Value::Int(first),
                Value::Int(last),
                node("127.0.0.1", port),
                node("127.0.0.1", port + 3),
            ])
        };
        let map = SlotMap::parse(Value::Array(vec![
            range(5461, 10922, 7001),
            range(0, 5460, 7000),
            range(10923, 16383, 7002),
        ]))
        .expect("a map");

        assert_eq!(map.node(0), Some(("127.0.0.1", 7000)));
        assert_eq!(map.node(5461), Some(("127.0.0.1", 7001)));
        assert_eq!(map.node(16383), Some(("127.0.0.1", 7002)));
        let gap = SlotMap::parse(Value::Array(vec![range(0, 10, 7000)])).expect("a map");
        assert_eq!(gap.node(11), None);
        assert!(SlotMap::parse(Value::Int(1)).is_none());
    }

    #[tokio::test]
    async fn one_url_is_a_single_server_and_several_are_a_cluster() {
        let single = connect("redis://127.0.0.1:6379").expect("single");
        let cluster =
            connect("redis://127.0.0.1:7000, redis://127.0.0.1:7001").expect("cluster URLs");

        assert!(!single.is_cluster());
        assert!(cluster.is_cluster());
        assert!(connect(" , ").is_err());
    }
}
