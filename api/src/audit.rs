//! The global event feed for auditors, in commit order.
//!
//! Positions are handed out before commit, so transactions commit out of order; a feed
//! that paged by `position > after` would skip an event that committed late. The feed
//! reads the log as the projections do (`queries::feed`, through `projections::log`):
//! in commit order, only what nothing running can precede, so once an event has been
//! served nothing can ever appear before it.

use axum::extract::State;
use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::auth::{Principal, Role};
use super::error::{ApiError, ErrorBody, Unavailable};
use super::extract::{ApiQuery, Consistency};
use super::reservations::EventOut;
use crate::state::AppState;
use app::queries::FeedError;
use utoipa_axum::{router::OpenApiRouter, routes};

/// This module's routes, each with its OpenAPI operation (one declaration: a route
/// cannot be served undocumented). The event feed.
pub(crate) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(feed))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct FeedQuery {
    /// The `position` of the last event already read (`next` of the previous page);
    /// 0 or absent to start from the beginning.
    #[param(minimum = 0)]
    pub after: Option<i64>,
    /// At most this many events (1..=1000, default 100).
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<i64>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct EventFeed {
    pub events: Vec<EventOut>,
    /// Pass as `after` to read the next page.
    pub next: i64,
}

/// Every event, in commit order, without gaps that later fill in.
#[utoipa::path(get, path = "/v1/events", tag = "audit", params(FeedQuery),
    responses((status = 200, body = EventFeed), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, description = "unknown_position", body = ErrorBody),
        (status = 422, body = ErrorBody), Unavailable),
    security(("bearer" = [])))]
pub async fn feed(
    State(state): State<AppState>,
    principal: Principal,
    consistency: Consistency,
    ApiQuery(query): ApiQuery<FeedQuery>,
) -> Result<Json<EventFeed>, ApiError> {
    principal.require(Role::AUDIT)?;
    let after = query.after.unwrap_or(0);
    let limit = query.limit.unwrap_or(100);
    if after < 0 {
        return Err(ApiError::invalid("after", "after must be 0 or a position"));
    }
    if !(1..=1000).contains(&limit) {
        return Err(ApiError::invalid(
            "limit",
            "limit must be between 1 and 1000",
        ));
    }
    let page = state
        .queries
        .on_replica(consistency.0, |q| async move { q.feed(after, limit).await })
        .await
        .map_err(|e| match e {
            FeedError::UnknownPosition(_) => ApiError::new(
                axum::http::StatusCode::NOT_FOUND,
                "unknown_position",
                "after must be the position of an event already read (or 0)",
            ),
            FeedError::Query(e) => e.into(),
        })?;
    let events = page.events.into_iter().map(EventOut::from).collect();
    let next = page.next;
    Ok(Json(EventFeed { events, next }))
}
