//! What a web page in the user's browser may do with roncho's HTTP routes:
//! nothing, unless its origin is configured.
//!
//! A browser runs every site's code beside the user's loopback services.
//! Three rules keep that code out, on every HTTP route (REST, `/mcp`,
//! metrics, health, docs):
//! - **Origins.** A request that says where it comes from (`Origin`, which
//!   browsers send on every cross-origin call and every `POST`) is refused
//!   unless that origin is this server's own (same host and port) or one
//!   configured (`allowed_origins`, answered with CORS headers). Fetch
//!   metadata (`Sec-Fetch-Site: cross-site` or `same-site` without an
//!   origin) is refused the same way, so a `<form>` or `<img>` from
//!   another site reaches nothing either.
//! - **Hosts.** A server that answers without keys (the zero-setup loopback
//!   default) serves only requests addressed to an IP address, a loopback
//!   name (`localhost`, `*.localhost`) or a configured host
//!   (`allowed_hosts`): a DNS name that rebinds to 127.0.0.1 makes the
//!   page's requests same-origin, but they still name the attacker's host,
//!   and are refused. An address needs no list: only a name can be rebound,
//!   and a page at another address is another origin.
//! - **Content types.** The REST edge reads a JSON body only under a JSON
//!   content type (its extractor answers 415 otherwise), so no "simple"
//!   request a browser sends without asking writes anything.
//!
//! Clients that are not browsers send no `Origin` and name the host they
//! connect to: Honcho's SDKs, `curl`, gRPC clients and probes pass.

use std::net::IpAddr;

use http::{HeaderMap, HeaderValue, Method, Uri};

/// The headers of a request that decide whether it came from a web page.
const SEC_FETCH_SITE: &str = "sec-fetch-site";
const SEC_FETCH_MODE: &str = "sec-fetch-mode";

/// Who may call from a browser, and under which host names the server
/// answers.
#[derive(Debug, Clone)]
pub struct BrowserPolicy {
    /// Origins (`scheme://host[:port]`, lowercase, no default port) whose
    /// pages may call, with CORS.
    origins: Vec<String>,
    /// Host names (lowercase, no port) served beside loopback ones.
    hosts: Vec<String>,
    /// Only loopback and configured hosts are served (no keys are required).
    check_hosts: bool,
}

/// What to do with a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Serve it; not a cross-origin call.
    Serve,
    /// Serve it, adding CORS headers for this configured origin.
    ServeCors(HeaderValue),
    /// A CORS preflight from this configured origin: answer it, run nothing.
    Preflight(HeaderValue),
    /// Refuse it (403) with the reason.
    Refuse(String),
}

impl Default for BrowserPolicy {
    /// Returns the policy of a server with nothing configured: no origin
    /// but its own, loopback hosts only.
    fn default() -> Self {
        Self {
            origins: Vec::new(),
            hosts: Vec::new(),
            check_hosts: true,
        }
    }
}

impl BrowserPolicy {
    /// Returns the policy letting `origins` call from pages and serving
    /// `hosts` beside loopback names (when hosts are checked: see
    /// [`Self::checking_hosts`]).
    pub fn new<O, H>(origins: O, hosts: H) -> Result<Self, String>
    where
        O: IntoIterator,
        O::Item: AsRef<str>,
        H: IntoIterator,
        H::Item: AsRef<str>,
    {
        let origins = origins
            .into_iter()
            .map(|origin| {
                let text = origin.as_ref().trim();
                normalize_origin(text).ok_or_else(|| {
                    format!("allowed_origins: `{text}` is not an origin (scheme://host[:port], such as https://app.example.com)")
                })
            })
            .collect::<Result<_, _>>()?;
        let hosts = hosts
            .into_iter()
            .map(|host| {
                let text = host.as_ref().trim();
                split_host(text)
                    .filter(|(name, _)| !name.is_empty())
                    .map(|(name, _)| name)
                    .ok_or_else(|| format!("allowed_hosts: `{text}` is not a host name (roncho.internal)"))
            })
            .collect::<Result<_, _>>()?;
        Ok(Self {
            origins,
            hosts,
            check_hosts: true,
        })
    }

    /// Returns this policy refusing hosts other than loopback and the
    /// configured ones when `check` (a server without keys), or serving
    /// every host (keys protect it).
    pub fn checking_hosts(mut self, check: bool) -> Self {
        self.check_hosts = check;
        self
    }

    /// Returns whether requests for other hosts than loopback and the
    /// configured ones are refused.
    pub fn checks_hosts(&self) -> bool {
        self.check_hosts
    }

    /// Decides what to do with a request of `method` for `uri` with `headers`.
    pub fn judge(&self, method: &Method, uri: &Uri, headers: &HeaderMap) -> Verdict {
        // One host per request: a second Host header, or one the request's
        // own authority (absolute form, HTTP/2's `:authority`) contradicts,
        // is refused rather than read one way here and another elsewhere.
        let mut given = headers.get_all(http::header::HOST).iter();
        let header = given
            .next()
            .map(|value| value.to_str().unwrap_or("\u{fffd}").to_owned());
        if given.next().is_some() {
            return Verdict::Refuse("more than one Host header".to_owned());
        }
        let authority = uri.authority().map(|authority| authority.as_str().to_owned());
        if let (Some(header), Some(authority)) = (&header, &authority)
            && !header.eq_ignore_ascii_case(authority)
        {
            return Verdict::Refuse("the Host header and the request's authority name different hosts".to_owned());
        }
        let host = header.or(authority);
        if self.check_hosts
            && let Some(host) = &host
            && !self.serves_host(host)
        {
            return Verdict::Refuse(format!(
                "this server answers without keys, so it serves only addresses, loopback names (localhost) \
                 and allowed_hosts; `{}` is none of them",
                host.chars().take(100).collect::<String>()
            ));
        }
        let origin = headers.get(http::header::ORIGIN);
        let Some(origin) = origin else {
            // No origin: not a script's cross-origin call, but a page's
            // form, image or link can still come from another site.
            return match fetched_from_another_site(method, uri.path(), headers) {
                Some(site) => Verdict::Refuse(format!(
                    "a request from a page of another site (sec-fetch-site: {site}) without an allowed origin"
                )),
                None => Verdict::Serve,
            };
        };
        let Some(text) = origin.to_str().ok().map(str::trim) else {
            return Verdict::Refuse("an origin that is not text".to_owned());
        };
        if let Some(normalized) = normalize_origin(text)
            && self.origins.contains(&normalized)
        {
            let preflight =
                method == Method::OPTIONS && headers.contains_key(http::header::ACCESS_CONTROL_REQUEST_METHOD);
            return match preflight {
                true => Verdict::Preflight(origin.clone()),
                false => Verdict::ServeCors(origin.clone()),
            };
        }
        if let (Some(host), Some(normalized)) = (&host, normalize_origin(text))
            && same_host_and_port(&normalized, host)
        {
            return Verdict::Serve;
        }
        Verdict::Refuse(format!(
            "cross-origin requests are refused: origin `{}` is not in allowed_origins",
            text.chars().take(100).collect::<String>()
        ))
    }

    /// Returns whether `host` (a Host header: name or address, maybe a
    /// port) is an address, a loopback name or a configured one.
    fn serves_host(&self, host: &str) -> bool {
        let Some((name, _)) = split_host(host) else {
            return false;
        };
        name.parse::<IpAddr>().is_ok() || is_loopback_name(&name) || self.hosts.contains(&name)
    }
}

/// Returns the site a request says it was fetched from, when that is
/// another site's page and not the user following a link to a page that
/// needs no key (the docs, health).
fn fetched_from_another_site<'a>(method: &Method, path: &str, headers: &'a HeaderMap) -> Option<&'a str> {
    let site = headers.get(SEC_FETCH_SITE)?.to_str().ok()?.trim();
    if !matches!(site, "cross-site" | "same-site") {
        return None;
    }
    let navigating = headers
        .get(SEC_FETCH_MODE)
        .and_then(|mode| mode.to_str().ok())
        .is_some_and(|mode| mode.trim() == "navigate");
    // Following a link to a page (the docs) reads nothing into the other
    // site; a link to any other route (a GET that emits webhooks) is refused.
    if navigating && (method == Method::GET || method == Method::HEAD) && crate::admission::is_open(path) {
        return None;
    }
    Some(site)
}

/// Splits a Host header or an authority into its lowercase name (without
/// brackets or a trailing dot) and its port; `None` if it is not one.
fn split_host(text: &str) -> Option<(String, Option<u16>)> {
    let text = text.trim();
    if text.is_empty() || text.contains(['/', '@', ' ', '\\', '?', '#']) {
        return None;
    }
    let (name, port) = if let Some(rest) = text.strip_prefix('[') {
        let (address, after) = rest.split_once(']')?;
        let port = match after {
            "" => None,
            after => Some(after.strip_prefix(':')?.parse().ok()?),
        };
        (address.to_owned(), port)
    } else {
        match text.rsplit_once(':') {
            Some((name, port)) if !name.contains(':') => (name.to_owned(), Some(port.parse().ok()?)),
            Some(_) => return None,
            None => (text.to_owned(), None),
        }
    };
    let name = name.strip_suffix('.').unwrap_or(&name).to_ascii_lowercase();
    Some((name, port))
}

/// Returns whether `name` (from [`split_host`]) always means this machine:
/// `localhost` and its subdomains (RFC 6761).
fn is_loopback_name(name: &str) -> bool {
    name == "localhost" || name.ends_with(".localhost")
}

/// Returns `origin` as `scheme://host[:port]`, lowercase, the scheme's
/// default port left out; `None` if it is not an http(s) origin.
fn normalize_origin(origin: &str) -> Option<String> {
    let (scheme, rest) = origin.split_once("://")?;
    let scheme = scheme.to_ascii_lowercase();
    let default_port = match scheme.as_str() {
        "http" => 80,
        "https" => 443,
        _ => return None,
    };
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    let (name, port) = split_host(rest)?;
    if name.is_empty() {
        return None;
    }
    let name = if name.contains(':') { format!("[{name}]") } else { name };
    Some(match port {
        Some(port) if port != default_port => format!("{scheme}://{name}:{port}"),
        _ => format!("{scheme}://{name}"),
    })
}

/// Returns whether the normalized `origin` names the host and port of the
/// `host` header (a request from one of this server's own pages).
fn same_host_and_port(origin: &str, host: &str) -> bool {
    let Some((scheme, rest)) = origin.split_once("://") else {
        return false;
    };
    let Some((origin_name, origin_port)) = split_host(rest) else {
        return false;
    };
    let Some((host_name, host_port)) = split_host(host) else {
        return false;
    };
    let default_port = if scheme == "https" { 443 } else { 80 };
    origin_name == host_name && origin_port.unwrap_or(default_port) == host_port.unwrap_or(default_port)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.append(
                http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                HeaderValue::from_str(value).unwrap(),
            );
        }
        headers
    }

    fn judge(policy: &BrowserPolicy, method: Method, pairs: &[(&str, &str)]) -> Verdict {
        policy.judge(&method, &Uri::from_static("/v3/workspaces/list"), &request(pairs))
    }

    fn refused(verdict: &Verdict) -> bool {
        matches!(verdict, Verdict::Refuse(_))
    }

    #[test]
    fn addresses_loopback_names_and_configured_hosts_are_served_and_every_other_name_refused_without_keys() {
        let policy = BrowserPolicy::new(None::<&str>, ["roncho.internal"]).unwrap();
        for host in [
            "localhost",
            "localhost:8000",
            "LOCALHOST:8000",
            "localhost.:8000",
            "app.localhost:8000",
            "127.0.0.1",
            "127.0.0.1:8000",
            "127.1.2.3:8000",
            "[::1]:8000",
            "[::1]",
            "[::ffff:127.0.0.1]:8000",
            "roncho.internal:8000",
            "Roncho.Internal",
            "10.0.0.1:8000",
            "[::2]:8000",
            "0.0.0.0:8000",
        ] {
            assert_eq!(
                judge(&policy, Method::POST, &[("host", host)]),
                Verdict::Serve,
                "{host}"
            );
        }
        for host in [
            "evil.example",
            "evil.example:8000",
            "127.0.0.1.evil.example:8000",
            "localhost.evil.example",
            "localhostx:8000",
            "0x7f.1:8000",
            "2130706433:8000",
            "localhost:8000@evil.example",
            "localhost:notaport",
            "[::1",
            "::1",
            "",
            "roncho.internal.evil",
        ] {
            assert!(refused(&judge(&policy, Method::GET, &[("host", host)])), "{host}");
        }
        // With keys, every host is served (a rebinding name reads nothing without one).
        let keyed = BrowserPolicy::default().checking_hosts(false);
        assert_eq!(judge(&keyed, Method::GET, &[("host", "evil.example")]), Verdict::Serve);
    }

    #[test]
    fn pages_of_other_origins_are_refused_unless_configured() {
        let policy = BrowserPolicy::new(["https://App.example.com/", "http://localhost:3000"], None::<&str>).unwrap();
        let host = ("host", "127.0.0.1:8000");
        for origin in [
            "https://evil.example",
            "http://localhost:3001",
            "https://app.example.com.evil",
            "http://app.example.com",
            "null",
            "file://",
            "http://127.0.0.1:8001",
            "https://127.0.0.1:8000.evil.example",
        ] {
            for method in [Method::GET, Method::POST, Method::OPTIONS, Method::DELETE] {
                let verdict = judge(&policy, method.clone(), &[host, ("origin", origin)]);
                assert!(refused(&verdict), "{method} from {origin}: {verdict:?}");
            }
        }
        // Its own pages (same host and port) are served.
        assert_eq!(
            judge(&policy, Method::POST, &[host, ("origin", "http://127.0.0.1:8000")]),
            Verdict::Serve
        );
        // Configured origins get CORS, and their preflights an answer.
        for origin in [
            "https://app.example.com",
            "https://APP.example.com:443",
            "http://localhost:3000",
        ] {
            assert!(matches!(
                judge(&policy, Method::POST, &[host, ("origin", origin)]),
                Verdict::ServeCors(_)
            ));
            assert!(matches!(
                judge(
                    &policy,
                    Method::OPTIONS,
                    &[host, ("origin", origin), ("access-control-request-method", "POST")]
                ),
                Verdict::Preflight(_)
            ));
        }
    }

    #[test]
    fn a_request_naming_two_hosts_is_refused() {
        let policy = BrowserPolicy::default();
        let two = request(&[("host", "localhost:8000"), ("host", "evil.example:8000")]);
        assert!(refused(&policy.judge(&Method::GET, &Uri::from_static("/health"), &two)));
        let absolute = Uri::from_static("http://evil.example:8000/v3/workspaces/list");
        let verdict = policy.judge(&Method::POST, &absolute, &request(&[("host", "localhost:8000")]));
        assert!(refused(&verdict), "{verdict:?}");
        // An authority alone is the host (HTTP/2): judged as a Host header is.
        assert!(refused(&policy.judge(&Method::POST, &absolute, &HeaderMap::new())));
        let loopback = Uri::from_static("http://localhost:8000/health");
        assert_eq!(
            policy.judge(&Method::GET, &loopback, &request(&[("host", "LOCALHOST:8000")])),
            Verdict::Serve
        );
    }

    #[test]
    fn a_rebinding_name_is_refused_even_when_the_page_is_same_origin() {
        let policy = BrowserPolicy::default();
        let verdict = judge(
            &policy,
            Method::POST,
            &[
                ("host", "rebind.evil.example:8000"),
                ("origin", "http://rebind.evil.example:8000"),
            ],
        );
        assert!(refused(&verdict), "{verdict:?}");
    }

    #[test]
    fn fetch_metadata_from_another_site_is_refused_but_following_a_link_is_not() {
        let policy = BrowserPolicy::default();
        let host = ("host", "localhost:8000");
        for site in ["cross-site", "same-site"] {
            for mode in ["no-cors", "cors", "same-origin"] {
                let verdict = judge(
                    &policy,
                    Method::POST,
                    &[host, ("sec-fetch-site", site), ("sec-fetch-mode", mode)],
                );
                assert!(refused(&verdict), "{site} {mode}");
            }
            // A form posted from another site navigates, but writes: refused.
            assert!(refused(&judge(
                &policy,
                Method::POST,
                &[host, ("sec-fetch-site", site), ("sec-fetch-mode", "navigate")]
            )));
            let navigate = [host, ("sec-fetch-site", site), ("sec-fetch-mode", "navigate")];
            assert!(
                refused(&judge(&policy, Method::GET, &navigate)),
                "a link to an API route"
            );
            assert_eq!(
                policy.judge(&Method::GET, &Uri::from_static("/docs"), &request(&navigate)),
                Verdict::Serve
            );
        }
        for site in ["same-origin", "none"] {
            assert_eq!(
                judge(&policy, Method::POST, &[host, ("sec-fetch-site", site)]),
                Verdict::Serve
            );
        }
    }

    #[test]
    fn bad_settings_are_named() {
        assert!(
            BrowserPolicy::new(["app.example.com"], None::<&str>)
                .unwrap_err()
                .contains("app.example.com")
        );
        assert!(BrowserPolicy::new(["ftp://x"], None::<&str>).is_err());
        assert!(BrowserPolicy::new(None::<&str>, ["a/b"]).unwrap_err().contains("a/b"));
    }
}
