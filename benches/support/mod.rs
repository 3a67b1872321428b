//! What every benchmark needs: a scratch database of its own on the PostgreSQL at
//! TEST_DATABASE_URL (default postgres://postgres@127.0.0.1/postgres), migrated, and
//! dropped at the end; and environment knobs.

#![allow(dead_code)]

use std::str::FromStr;

use sqlx::postgres::PgConnectOptions;
use sqlx::{ConnectOptions, Connection, PgPool};

pub struct Scratch {
    server: String,
    pub name: String,
    pub pool: PgPool,
}

impl Scratch {
    pub async fn create(max_connections: u32) -> anyhow::Result<Self> {
        let server = std::env::var("TEST_DATABASE_URL")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into());
        let name = format!("rsv_bench_{}", uuid::Uuid::new_v4().simple());
        let url = PgConnectOptions::from_str(&server)?
            .database(&name)
            .to_url_lossy()
            .to_string();
        store::db::connect_and_migrate(&url, 1).await?.close().await;
        let pool = store::db::write_pool(&url, max_connections).await?;
        Ok(Self { server, name, pool })
    }

    pub async fn drop(self) -> anyhow::Result<()> {
        self.pool.close().await;
        let mut admin = PgConnectOptions::from_str(&self.server)?.connect().await?;
        sqlx::query(&format!(
            "DROP DATABASE IF EXISTS \"{}\" WITH (FORCE)",
            self.name
        ))
        .execute(&mut admin)
        .await?;
        admin.close().await?;
        Ok(())
    }
}

/// An environment variable parsed, or `default`.
pub fn env_or<T: FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}
