//! Rebuild when a migration is added or changed: `sqlx::migrate!` embeds the
//! `migrations/` directory in the crate, and cargo does not watch it by itself.
fn main() {
    println!("cargo:rerun-if-changed=../migrations");
}
