//! The console: a web page at `/ui` on the REST port that shows what memory
//! holds, through the same routes and keys as any client.
//!
//! Its three files are part of the binary; nothing is fetched from anywhere
//! else and nothing is built by the user. The page needs no key to load and
//! holds no secret: it asks for a key when the server wants one, keeps it in
//! the tab's `sessionStorage`, and sends it as any client does. The headers
//! keep other sites out: a content security policy that allows this origin's
//! script, style and requests alone (no inline script, no `eval`), no
//! framing (a page of another site cannot lay the console under its own
//! clicks), no sniffing, no referrer. What memory holds is written into the
//! page as text, never as markup.

use axum::Router;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use http::{HeaderValue, header};

/// The console's files: path, content type, content.
pub const FILES: [(&str, &str, &str); 3] = [
    ("/ui", "text/html; charset=utf-8", include_str!("../console/index.html")),
    (
        "/ui/console.js",
        "text/javascript; charset=utf-8",
        include_str!("../console/console.js"),
    ),
    (
        "/ui/console.css",
        "text/css; charset=utf-8",
        include_str!("../console/console.css"),
    ),
];

/// What every console file is served with.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

fn served(content_type: &'static str, body: &'static str) -> Response {
    let mut response = body.into_response();
    let headers = response.headers_mut();
    for (name, value) in [
        (header::CONTENT_TYPE, content_type),
        (header::CONTENT_SECURITY_POLICY, CONTENT_SECURITY_POLICY),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::REFERRER_POLICY, "no-referrer"),
        (header::CACHE_CONTROL, "no-cache"),
        (
            http::HeaderName::from_static("cross-origin-opener-policy"),
            "same-origin",
        ),
        (
            http::HeaderName::from_static("cross-origin-resource-policy"),
            "same-origin",
        ),
    ] {
        headers.insert(name, HeaderValue::from_static(value));
    }
    response
}

/// The console's routes; they need no key (the page asks for one).
pub fn routes() -> Router {
    let mut router = Router::new();
    for (path, content_type, body) in FILES {
        router = router.route(path, get(move || async move { served(content_type, body) }));
    }
    router.route("/ui/", get(|| async { axum::response::Redirect::permanent("/ui") }))
}
