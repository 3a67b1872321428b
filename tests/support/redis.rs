//! A Redis server of a test's own on a free loopback port, which the test may stop and
//! start again (an outage, a Redis that comes back empty).

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::free_port;

/// A private Redis server on a free port, which a test may stop and start again.
pub struct PrivateRedis {
    pub port: u16,
    child: Option<Child>,
}

impl PrivateRedis {
    pub fn start_on(port: u16) -> Self {
        let child = Command::new("redis-server")
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server must be installed (.ci/run installs it)");
        Self {
            port,
            child: Some(child),
        }
    }

    pub fn start() -> Self {
        Self::start_on(free_port())
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    pub async fn wait_ready(&self) {
        for _ in 0..100 {
            if let Ok(client) = redis::Client::open(self.url()) {
                if let Ok(mut conn) = client.get_multiplexed_async_connection().await {
                    let pong: Result<String, _> = redis::cmd("PING").query_async(&mut conn).await;
                    if pong.is_ok() {
                        return;
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("private redis did not start");
    }
}

impl Drop for PrivateRedis {
    fn drop(&mut self) {
        self.stop();
    }
}
