//! A Redis Cluster of its own for a test: three masters and a replica of each, on
//! loopback ports of their own (`redis-server --cluster-enabled yes`, joined by
//! `redis-cli --cluster create`), nothing kept on disk but the nodes' files in a scratch
//! directory. Killed and removed on drop.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::free_port;

pub struct RedisCluster {
    dir: PathBuf,
    nodes: Vec<(u16, Option<Child>)>,
}

fn cli(port: u16, args: &[&str]) -> String {
    let output = Command::new("redis-cli")
        .args(["-h", "127.0.0.1", "-p", &port.to_string()])
        .args(args)
        .output()
        .expect("redis-cli must be installed (.ci/run installs it)");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// One node, answering: on ports found free, and on others if it cannot have them (a
/// port found free may be taken by another test before the node binds it; the node
/// then exits, and is started again elsewhere rather than waited for).
async fn start_node(dir: &std::path::Path) -> (u16, Option<Child>) {
    for _ in 0..5 {
        let port = free_port();
        let mut child = Command::new("redis-server")
            .args([
                "--port",
                &port.to_string(),
                // The bus port must be free too (port + 10000 may not exist).
                "--cluster-port",
                &free_port().to_string(),
                "--bind",
                "127.0.0.1",
                "--cluster-enabled",
                "yes",
                "--cluster-config-file",
                &dir.join(format!("nodes-{port}.conf")).display().to_string(),
                "--cluster-node-timeout",
                "1000",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                &dir.display().to_string(),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server must be installed (.ci/run installs it)");
        for _ in 0..100 {
            if cli(port, &["PING"]).trim() == "PONG" {
                return (port, Some(child));
            }
            if child.try_wait().ok().flatten().is_some() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let _ = child.kill();
        let _ = child.wait();
    }
    panic!("no redis-server node answered on five pairs of ports");
}

impl RedisCluster {
    /// Three masters with a replica each, every slot served, every replica in sync.
    pub async fn start() -> Self {
        let dir =
            std::env::temp_dir().join(format!("rsv-cluster-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).expect("scratch directory");
        let mut nodes = Vec::new();
        for _ in 0..6 {
            nodes.push(start_node(&dir).await);
        }
        let cluster = Self { dir, nodes };
        let addresses: Vec<String> = cluster
            .nodes
            .iter()
            .map(|(port, _)| format!("127.0.0.1:{port}"))
            .collect();
        let created = Command::new("redis-cli")
            .args(["--cluster", "create"])
            .args(&addresses)
            .args(["--cluster-replicas", "1", "--cluster-yes"])
            .output()
            .expect("redis-cli --cluster create");
        assert!(
            created.status.success(),
            "cluster create: {}{}",
            String::from_utf8_lossy(&created.stdout),
            String::from_utf8_lossy(&created.stderr)
        );
        cluster.wait_healthy(3, 3).await;
        cluster
    }

    /// The URL to give `REDIS_URL`: every node, comma-separated.
    pub fn url(&self) -> String {
        self.nodes
            .iter()
            .map(|(port, _)| format!("redis://127.0.0.1:{port}"))
            .collect::<Vec<_>>()
            .join(",")
    }

    fn live_ports(&self) -> Vec<u16> {
        self.nodes
            .iter()
            .filter(|(_, child)| child.is_some())
            .map(|(port, _)| *port)
            .collect()
    }

    /// `CLUSTER NODES` as one live node sees it: `(port, is master, healthy)` per node.
    fn view(&self) -> Vec<(u16, bool, bool)> {
        let Some(port) = self.live_ports().first().copied() else {
            return Vec::new();
        };
        cli(port, &["CLUSTER", "NODES"])
            .lines()
            .filter_map(|line| {
                let fields: Vec<&str> = line.split_whitespace().collect();
                let address = fields.get(1)?;
                let port = address
                    .split(['@', ','])
                    .next()?
                    .rsplit_once(':')?
                    .1
                    .parse()
                    .ok()?;
                let flags = fields.get(2)?;
                let healthy = !flags.contains("fail") && fields.get(7) == Some(&"connected");
                Some((port, flags.contains("master"), healthy))
            })
            .collect()
    }

    /// Waits until the cluster serves every slot with `masters` healthy masters and
    /// `replicas` healthy replicas, each replica's link to its master up.
    pub async fn wait_healthy(&self, masters: usize, replicas: usize) {
        wait_until(
            &format!("a healthy cluster of {masters} masters and {replicas} replicas"),
            || {
                let live = self.live_ports();
                let view = self.view();
                let healthy_masters = view.iter().filter(|n| n.1 && n.2).count();
                let healthy_replicas = view.iter().filter(|n| !n.1 && n.2).count();
                healthy_masters == masters
                    && healthy_replicas == replicas
                    && live.iter().all(|port| {
                        cli(*port, &["CLUSTER", "INFO"]).contains("cluster_state:ok")
                            && !cli(*port, &["INFO", "replication"])
                                .contains("master_link_status:down")
                    })
            },
        )
        .await;
    }

    /// The port of the master serving the slot of `key`.
    pub fn master_of(&self, key: &str) -> Option<u16> {
        let port = self.live_ports().first().copied()?;
        let slot: u16 = cli(port, &["CLUSTER", "KEYSLOT", key])
            .trim()
            .parse()
            .ok()?;
        cli(port, &["CLUSTER", "NODES"]).lines().find_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            if !fields.get(2)?.contains("master") {
                return None;
            }
            let serves = fields.iter().skip(8).any(|range| {
                let (low, high) = range.split_once('-').unwrap_or((range, range));
                matches!((low.parse::<u16>(), high.parse::<u16>()), (Ok(l), Ok(h)) if l <= slot && slot <= h)
            });
            if !serves {
                return None;
            }
            fields.get(1)?.split(['@', ',']).next()?.rsplit_once(':')?.1.parse().ok()
        })
    }

    /// Kills the node on `port` at once (SIGKILL), as a crash would.
    pub fn kill(&mut self, port: u16) {
        for (node, child) in &mut self.nodes {
            if *node == port {
                if let Some(mut child) = child.take() {
                    let _ = child.kill();
                    let _ = child.wait();
                }
            }
        }
    }

    /// Runs a command on the node at `port` (for a test to flush one master, say).
    pub fn on_node(&self, port: u16, args: &[&str]) -> String {
        cli(port, args)
    }
}

async fn wait_until(what: &str, mut condition: impl FnMut() -> bool) {
    for _ in 0..300 {
        if condition() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("waited 30 s for {what}");
}

impl Drop for RedisCluster {
    fn drop(&mut self) {
        for (_, child) in &mut self.nodes {
            if let Some(mut child) = child.take() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
