//! The HTTP API (v1), as `docs/api.md` describes it: routing, shared state, the
//! request span and metrics middleware, and the OpenAPI document generated from the
//! handlers' own types.
//!
//! The layer above the use cases (`app`): it parses and validates what a client sends
//! (once, at the boundary: [`extract`], [`params`]), calls one command or query, and
//! maps every outcome to a status code in one place ([`error`]). Nothing below it knows
//! HTTP; [`telemetry`] is here because request metrics are its first user.

pub mod analytics;
pub mod audit;
pub mod audit_verify;
pub mod auth;
pub mod blocks;
pub mod bodies;
pub mod calendar;
pub mod catalog;
pub mod console;
pub mod error;
pub mod extract;
pub mod guests;
pub mod ops;
pub mod params;
pub mod payments;
pub mod rate_plans;
pub mod reservations;
pub mod schema;
pub mod search;
pub mod sessions;
pub mod state;
pub mod stays;
pub mod taxes;
pub mod telemetry;
pub mod webhooks;
pub mod what_if;

use std::sync::LazyLock;
use std::time::{Duration, Instant};

use axum::extract::{DefaultBodyLimit, MatchedPath, Request};
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::Router;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::timeout::TimeoutLayer;
use tower_http::trace::TraceLayer;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};
use utoipa_axum::router::OpenApiRouter;

use error::ApiError;
pub use state::{AppState, AppStateInner};

#[derive(OpenApi)]
#[openapi(
    info(title = "Hotel reservations API", version = "1",
        description = "Hold, confirm, cancel and change hotel stays; every room-night is sold once (or up to the hotel's overbooking allowance). Stays are half-open date ranges [start_date, end_date). Errors are {\"error\", \"message\", ...}."),
    modifiers(&BearerAuth),
    tags(
        (name = "catalog", description = "Hotels, room types and inventory (admin)"),
        (name = "browse", description = "Hotel look-ups and availability (any role)"),
        (name = "reservations", description = "The reservation lifecycle (channel)"),
        (name = "payments", description = "The payment gateway's callback (signed, no bearer token)"),
        (name = "audit", description = "Event history (auditor)"),
        (name = "webhooks", description = "Partner webhooks: subscriptions and their delivery log (admin)"),
        (name = "guests", description = "A guest's data: its export and its erasure (admin)"),
        (name = "analytics", description = "Occupancy, revenue and reservation look-ups from the read side (admin, auditor; a channel sees its own reservations)"),
        (name = "staff", description = "Staff accounts and their console sessions (sign-in; admins manage accounts)"),
        (name = "operations", description = "Health, readiness, metrics"),
    )
)]
pub struct ApiDoc;

struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

/// A query parameter whose schema is written out (`schema_with`, for the rules of
/// `schema`) loses the `required` its Rust type gives it: the derive says nothing then.
/// Every `start_date` and `end_date` (and the turnaway report's `from` and `to`) in a
/// query is required (a range needs both ends), so they are marked so here.
struct RequiredRanges;

impl Modify for RequiredRanges {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::path::ParameterIn;
        use utoipa::openapi::Required;
        for item in openapi.paths.paths.values_mut() {
            let operations = [
                &mut item.get,
                &mut item.put,
                &mut item.post,
                &mut item.delete,
            ];
            for operation in operations.into_iter().flatten() {
                for parameter in operation.parameters.iter_mut().flatten() {
                    let range_end =
                        ["start_date", "end_date", "from", "to"].contains(&parameter.name.as_str());
                    if range_end && parameter.parameter_in == ParameterIn::Query {
                        parameter.required = Required::True;
                    }
                }
            }
        }
    }
}

/// A hold is one room type or several `lines`, never both (`schema::one_room_type_or_lines`),
/// and a booking from a block names no plan (`schema::no_plan_with_block`):
/// the rules are added to the body's derived schema here, as `allOf` with it.
struct OneShapeOfHold;

impl Modify for OneShapeOfHold {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let Some(components) = openapi.components.as_mut() else {
            return;
        };
        if let Some(derived) = components.schemas.remove("CreateReservation") {
            let both = utoipa::openapi::schema::AllOfBuilder::new()
                .item(derived)
                .item(schema::one_room_type_or_lines())
                .item(schema::no_plan_with_block());
            components
                .schemas
                .insert("CreateReservation".to_owned(), both.into());
        }
    }
}

/// Every route of the API with its OpenAPI operation: each module declares its own
/// (`routes()`), so the served routes and the document cannot differ.
fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(ApiDoc::openapi())
        .merge(catalog::routes())
        .merge(rate_plans::routes())
        .merge(taxes::routes())
        .merge(blocks::routes())
        .merge(calendar::routes())
        .merge(analytics::routes())
        .merge(what_if::routes())
        .merge(stays::routes())
        .merge(search::routes())
        .merge(reservations::routes())
        .merge(payments::routes())
        .merge(audit::routes())
        .merge(audit_verify::routes())
        .merge(guests::routes())
        .merge(webhooks::routes())
        .merge(sessions::routes())
        .merge(ops::routes())
}

/// The OpenAPI document of every route (`GET /openapi.json`), built once.
pub fn openapi() -> &'static utoipa::openapi::OpenApi {
    static DOCUMENT: LazyLock<utoipa::openapi::OpenApi> = LazyLock::new(|| {
        let (_, mut document) = routes().split_for_parts();
        RequiredRanges.modify(&mut document);
        OneShapeOfHold.modify(&mut document);
        document
    });
    &DOCUMENT
}

pub fn router(state: AppState) -> Router {
    let (api, _) = routes().split_for_parts();
    api.merge(console::router())
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(middleware::from_fn_with_state(
            state.clone(),
            consistency_token,
        ))
        .with_state(state)
        .layer(DefaultBodyLimit::max(64 * 1024))
        .layer(middleware::from_fn(record_request))
        .layer(TimeoutLayer::with_status_code(
            StatusCode::REQUEST_TIMEOUT,
            Duration::from_secs(30),
        ))
        .layer(
            TraceLayer::new_for_http().make_span_with(|request: &Request| {
                let route = request
                    .extensions()
                    .get::<MatchedPath>()
                    .map(|p| p.as_str().to_owned())
                    .unwrap_or_else(|| request.uri().path().to_owned());
                tracing::info_span!("request", method = %request.method(), route = %route)
            }),
        )
        .layer(CatchPanicLayer::custom(|_| {
            tracing::error!("a handler panicked");
            ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal",
                "an internal error occurred; it has been logged",
            )
            .into_response()
        }))
}

async fn not_found() -> ApiError {
    ApiError::not_found("no such endpoint")
}

async fn method_not_allowed() -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        "this endpoint does not accept that method",
    )
}

/// With a read replica, every write that succeeded answers `Consistency-Token`: the
/// primary's WAL position after its commit, which a later read (to any server) may
/// present to be answered from data that includes the write (see `queries::replica`).
async fn consistency_token(
    axum::extract::State(state): axum::extract::State<AppState>,
    request: Request,
    next: Next,
) -> Response {
    let writes = !request.method().is_safe();
    let mut response = next.run(request).await;
    if writes && response.status().is_success() && state.queries.replica().is_some() {
        match app::queries::replica::current_lsn(&state.pool).await {
            Ok(lsn) => {
                if let Ok(value) = axum::http::HeaderValue::from_str(&lsn.to_string()) {
                    response
                        .headers_mut()
                        .insert(extract::CONSISTENCY_TOKEN, value);
                }
            }
            // The write stands; a read without a token is answered as of its `as_of`.
            Err(e) => {
                tracing::warn!(error = %e, "no consistency token: the primary's WAL position is unreadable")
            }
        }
    }
    response
}

/// Counts requests by route and status, with a latency histogram.
async fn record_request(request: Request, next: Next) -> Response {
    let started = Instant::now();
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_owned())
        .unwrap_or_else(|| "unmatched".to_owned());
    let method = request.method().to_string();
    let response = next.run(request).await;
    let status = response.status().as_u16().to_string();
    let labels = [("method", method), ("route", route), ("status", status)];
    metrics::counter!("http_requests_total", &labels).increment(1);
    metrics::histogram!("http_request_duration_seconds", &labels)
        .record(started.elapsed().as_secs_f64());
    response
}
