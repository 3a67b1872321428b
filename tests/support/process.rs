//! `reservations serve` as a process of its own, on a free port, for the tests that
//! need several servers or kill one (`kill -9`): started with the test tokens and the
//! environment given, waited for until it answers, killed when dropped.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::{TestDb, TOKENS};

/// A port nothing listens on now (the OS picked it; free until someone binds it).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

pub struct ServerProcess {
    child: Child,
    pub port: u16,
}

impl ServerProcess {
    /// A server on `db` with `env` on top of the test settings; returns once it
    /// answers `/healthz`.
    pub async fn start(db: &TestDb, env: &[(&str, String)]) -> Self {
        let port = free_port();
        let mut command = Command::new(env!("CARGO_BIN_EXE_reservations"));
        command
            .arg("serve")
            .env("DATABASE_URL", &db.url)
            .env("LISTEN_ADDR", format!("127.0.0.1:{port}"))
            .env("API_TOKENS", TOKENS)
            .env("HOLD_LIMIT_PER_GUEST", "0")
            // The tests' webhook receivers listen on loopback.
            .env("WEBHOOK_ALLOWED_HOSTS", "127.0.0.1")
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        for (name, value) in env {
            command.env(name, value);
        }
        let child = command.spawn().expect("start the server");
        let server = Self { child, port };
        let client = reqwest::Client::builder()
            .no_proxy()
            .timeout(Duration::from_secs(2))
            .build()
            .expect("client");
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            let up = client
                .get(server.url("/healthz"))
                .send()
                .await
                .is_ok_and(|r| r.status().is_success());
            if up {
                return server;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "the server never answered"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// A request with `token` (and `Idempotency-Key: key`, and a JSON body, when given),
    /// read whole.
    pub async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        token: &str,
        key: Option<&str>,
        body: Option<&serde_json::Value>,
    ) -> super::Reply {
        let client = reqwest::Client::builder()
            .no_proxy()
            .timeout(Duration::from_secs(30))
            .build()
            .expect("client");
        let mut request = client.request(method, self.url(path)).bearer_auth(token);
        if let Some(key) = key {
            request = request.header("Idempotency-Key", key);
        }
        if let Some(body) = body {
            request = request.json(body);
        }
        super::Reply::of(request.send().await.expect("the server answers")).await
    }

    /// The test hotel (`HOTEL`, `KING` rooms on `nights` nights from `first`), through
    /// the API.
    pub async fn seed_hotel(&self, first: chrono::NaiveDate, nights: u64, rooms: i64) {
        use reqwest::Method;
        use serde_json::json;
        let hotel = format!("/v1/hotels/{}", super::HOTEL);
        let put = |path: String, body: serde_json::Value| async move {
            self.call(Method::PUT, &path, super::ADMIN, None, Some(&body))
                .await
                .assert_status(200);
        };
        put(
            hotel.clone(),
            json!({"name": "Hotel Tejo", "city": "Lisbon", "timezone": "Europe/Lisbon"}),
        )
        .await;
        let room_type = format!("{hotel}/room-types/{}", super::KING);
        put(
            room_type.clone(),
            json!({"name": "king", "max_occupancy": 2}),
        )
        .await;
        put(
            format!("{room_type}/inventory"),
            json!({"start_date": first, "end_date": super::plus_days(first, nights),
                   "total_rooms": rooms, "overbooking_allowance": 0, "rate_cents": super::RATE}),
        )
        .await;
    }

    /// Holds `body` and confirms it with a card that authorizes, as the web channel;
    /// returns the reservation's id.
    pub async fn hold_and_confirm(&self, body: &serde_json::Value) -> String {
        use reqwest::Method;
        let held = self
            .call(
                Method::POST,
                "/v1/reservations",
                super::WEB,
                Some("hold"),
                Some(body),
            )
            .await;
        let id = held.assert_status(201)["reservation_id"]
            .as_str()
            .expect("an id")
            .to_owned();
        let pay = serde_json::json!({"payment_token": "tok_ok"});
        let path = format!("/v1/reservations/{id}/confirm");
        self.call(Method::POST, &path, super::WEB, Some("pay"), Some(&pay))
            .await
            .assert_status(200);
        id
    }

    /// `kill -9`: no shutdown, no last batch, connections dropped by the kernel.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        self.kill();
    }
}
