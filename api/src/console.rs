//! The staff console: a browser page for hotel staff and auditors (the inventory
//! calendar, reservations, the audit and the stalled work), served by the server
//! itself under `/console/`.
//!
//! The page is plain HTML, CSS and ES modules from the repository's `console/` folder,
//! embedded in the binary at build time (`build.rs`): no build step, no Node.js at run
//! time, nothing to deploy beside the server. It holds no rights of its own: it calls
//! the same `/v1` API with the token staff sign in with, so a role can do in the page
//! exactly what it can do over HTTP.

use axum::extract::Path;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use axum::Router;

use super::error::ApiError;

mod assets {
    include!(concat!(env!("OUT_DIR"), "/console_assets.rs"));
}

/// Only the page's own files, no inline script or style: what a guest's name could
/// smuggle into the page cannot run.
const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; script-src 'self'; \
     style-src 'self'; img-src 'self' data:; connect-src 'self'; object-src 'none'; \
     base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

fn content_type(name: &str) -> &'static str {
    match name.rsplit('.').next() {
        Some("html") => "text/html; charset=utf-8",
        Some("css") => "text/css; charset=utf-8",
        Some("js" | "mjs") => "text/javascript; charset=utf-8",
        Some("svg") => "image/svg+xml",
        Some("png") => "image/png",
        Some("ico") => "image/x-icon",
        Some("json") => "application/json",
        _ => "application/octet-stream",
    }
}

fn asset(name: &str) -> Response {
    let Some((_, body)) = assets::ASSETS.iter().find(|(n, _)| *n == name) else {
        return ApiError::not_found("no such console file").into_response();
    };
    (
        StatusCode::OK,
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static(content_type(name)),
            ),
            // The files change with the binary: revalidate rather than keep a stale
            // page after an upgrade.
            (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
            (
                header::CONTENT_SECURITY_POLICY,
                HeaderValue::from_static(CONTENT_SECURITY_POLICY),
            ),
            (
                header::X_CONTENT_TYPE_OPTIONS,
                HeaderValue::from_static("nosniff"),
            ),
            (
                header::REFERRER_POLICY,
                HeaderValue::from_static("no-referrer"),
            ),
        ],
        *body,
    )
        .into_response()
}

async fn index() -> Response {
    asset("index.html")
}

async fn file(Path(name): Path<String>) -> Response {
    asset(&name)
}

/// `/console` (redirected to `/console/`, so the page's relative URLs resolve), the
/// page, and its files.
pub fn router<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route(
            "/console",
            get(|| async { Redirect::permanent("/console/") }),
        )
        .route("/console/", get(index))
        .route("/console/{name}", get(file))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_and_its_modules_are_embedded() {
        let names: Vec<&str> = assets::ASSETS.iter().map(|(n, _)| *n).collect();
        assert!(names.contains(&"index.html"), "{names:?}");
        assert!(names.iter().any(|n| n.ends_with(".js")), "{names:?}");
    }

    #[test]
    fn each_file_is_served_with_its_type() {
        assert_eq!(content_type("app.js"), "text/javascript; charset=utf-8");
        assert_eq!(content_type("console.css"), "text/css; charset=utf-8");
        assert_eq!(content_type("index.html"), "text/html; charset=utf-8");
        assert_eq!(content_type("notes"), "application/octet-stream");
    }
}
