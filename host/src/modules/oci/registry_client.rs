//! The few requests of the OCI distribution API that pulling and pushing a module take, over the
//! host's own HTTP client (the `http` capability's: same TLS roots, `SSL_CERT_FILE`, and the
//! environment's `HTTPS_PROXY`/`NO_PROXY`). Every answer is read with a byte cap and every exchange
//! with a time limit, so a registry that answers without end is refused, not read whole.
//!
//! Authentication as registries ask for it: a `401` with `WWW-Authenticate: Basic` is answered with
//! the credentials; with `Bearer realm=…,service=…`, a token is fetched from the realm (with the
//! credentials, if any) for `repository:<repo>:pull` (or `pull,push`) and sent from then on.

use std::time::Duration;

use base64::Engine as _;
use bytes::Bytes;
use http::header::{HeaderValue, AUTHORIZATION, CONTENT_LENGTH, CONTENT_TYPE, LOCATION};
use http_body_util::{BodyExt, Full, Limited};
use tokio::sync::Mutex;

use super::reference::Reference;
use super::variables::PLAIN_HTTP_ENV;

/// The largest token answer read from an authorization realm.
const MAX_TOKEN_ANSWER: u64 = 1 << 20;
/// The largest error answer read (a registry's JSON error).
const MAX_ERROR_ANSWER: u64 = 64 << 10;
/// How many redirects a blob download follows (registries hand blobs over to object storage).
const MAX_REDIRECTS: usize = 3;

/// Registry credentials (from a docker config: `.dockerconfigjson`).
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    /// User name.
    pub(crate) username: String,
    /// Password or access token.
    pub(crate) password: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Credentials({}, ***)", self.username)
    }
}

impl Credentials {
    fn basic(&self) -> String {
        let pair = format!("{}:{}", self.username, self.password);
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(pair)
        )
    }
}

/// Why a registry exchange failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RegistryError {
    /// The registry could not be reached, or did not answer in time: a last good copy may serve.
    #[error("{0}")]
    Unreachable(String),
    /// It answered with more bytes than allowed.
    #[error("{0}")]
    TooLarge(String),
    /// It answered, with an error status or an answer that cannot be used.
    #[error("{0}")]
    Refused(String),
}

/// One repository of one registry, with the authorization it has obtained so far.
pub(crate) struct Registry {
    base: String,
    repository: String,
    credentials: Option<Credentials>,
    /// `pull` or `pull,push`: what a bearer token is asked for.
    actions: &'static str,
    timeout: Duration,
    authorization: Mutex<Option<HeaderValue>>,
    /// Hosts (`host:port`) besides the registry's own that may be reached over plain HTTP: a Bearer
    /// token realm elsewhere must be HTTPS, or credentials would cross the network in the clear.
    plain_hosts: Vec<String>,
}

/// An answer, its body read within the cap.
#[derive(Debug)]
pub(crate) struct Answer {
    /// Status code.
    pub(crate) status: u16,
    /// Headers.
    pub(crate) headers: http::HeaderMap,
    /// Body.
    pub(crate) body: Bytes,
}

impl Registry {
    /// The repository of `reference`, over plain HTTP when `plain_http`; each exchange within
    /// `timeout`. `push` asks bearer tokens for push as well as pull.
    pub(crate) fn new(
        reference: &Reference,
        plain_http: bool,
        credentials: Option<Credentials>,
        timeout: Duration,
        push: bool,
    ) -> Registry {
        let scheme = if plain_http { "http" } else { "https" };
        Registry {
            base: format!("{scheme}://{}", reference.api_host()),
            repository: reference.repository.clone(),
            credentials,
            actions: if push { "pull,push" } else { "pull" },
            timeout,
            authorization: Mutex::new(None),
            plain_hosts: if plain_http {
                vec![reference.api_host().to_string()]
            } else {
                Vec::new()
            },
        }
    }

    /// Lets token realms on these hosts (`host:port`, as [`PLAIN_HTTP_ENV`] lists them) be
    /// plain HTTP too.
    pub(crate) fn with_plain_hosts(mut self, hosts: &[String]) -> Registry {
        self.plain_hosts.extend(hosts.iter().cloned());
        self
    }

    /// `https://host/v2/<repository>/<rest>`.
    fn url(&self, rest: &str) -> String {
        format!("{}/v2/{}/{rest}", self.base, self.repository)
    }

    /// A manifest, by tag or digest, at most `limit` bytes.
    pub(crate) async fn manifest(
        &self,
        reference: &str,
        limit: u64,
    ) -> Result<Bytes, RegistryError> {
        let url = self.url(&format!("manifests/{reference}"));
        let accept = format!("{}, {}", super::layout::OCI_MANIFEST, DOCKER_MANIFEST);
        let answer = self
            .exchange(
                "GET",
                &url,
                &[("accept", accept.as_str())],
                Bytes::new(),
                limit,
            )
            .await?;
        expect(&answer, &[200], &format!("GET {url}"))?;
        Ok(answer.body)
    }

    /// A blob, which must be `size` bytes (more is refused as soon as it arrives).
    pub(crate) async fn blob(&self, digest: &str, size: u64) -> Result<Bytes, RegistryError> {
        let url = self.url(&format!("blobs/{digest}"));
        let answer = self.exchange("GET", &url, &[], Bytes::new(), size).await?;
        expect(&answer, &[200], &format!("GET {url}"))?;
        Ok(answer.body)
    }

    /// Whether the repository has a blob.
    pub(crate) async fn has_blob(&self, digest: &str) -> Result<bool, RegistryError> {
        let url = self.url(&format!("blobs/{digest}"));
        let answer = self.exchange("HEAD", &url, &[], Bytes::new(), 0).await?;
        match answer.status {
            200 => Ok(true),
            404 => Ok(false),
            _ => expect(&answer, &[200], &format!("HEAD {url}")).map(|()| false),
        }
    }

    /// Uploads a blob in one request (POST for an upload location, then PUT with the digest).
    pub(crate) async fn upload_blob(
        &self,
        digest: &str,
        bytes: Bytes,
    ) -> Result<(), RegistryError> {
        let start = self.url("blobs/uploads/");
        let answer = self
            .exchange("POST", &start, &[], Bytes::new(), MAX_ERROR_ANSWER)
            .await?;
        expect(&answer, &[202], &format!("POST {start}"))?;
        let location = answer
            .headers
            .get(LOCATION)
            .and_then(|v| v.to_str().ok())
            .ok_or_else(|| {
                RegistryError::Refused(format!("POST {start}: the answer names no upload location"))
            })?;
        let location = self.absolute(location);
        let separator = if location.contains('?') { '&' } else { '?' };
        let put = format!("{location}{separator}digest={digest}");
        let answer = self
            .exchange(
                "PUT",
                &put,
                &[("content-type", "application/octet-stream")],
                bytes,
                MAX_ERROR_ANSWER,
            )
            .await?;
        expect(
            &answer,
            &[201],
            &format!("PUT {}", self.url("blobs/uploads/…")),
        )
    }

    /// Puts a manifest under `tag`; returns the digest the registry gives it, if it says.
    pub(crate) async fn put_manifest(
        &self,
        tag: &str,
        media_type: &str,
        bytes: Bytes,
    ) -> Result<Option<String>, RegistryError> {
        let url = self.url(&format!("manifests/{tag}"));
        let answer = self
            .exchange(
                "PUT",
                &url,
                &[("content-type", media_type)],
                bytes,
                MAX_ERROR_ANSWER,
            )
            .await?;
        expect(&answer, &[201], &format!("PUT {url}"))?;
        Ok(answer
            .headers
            .get("docker-content-digest")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string))
    }

    /// A `Location` made absolute against the registry's base. Schemes are case-insensitive, so
    /// `HTTPS://…` is as absolute as `https://…`.
    fn absolute(&self, location: &str) -> String {
        if starts_with_ignoring_case(location, "http://")
            || starts_with_ignoring_case(location, "https://")
        {
            location.to_string()
        } else {
            format!("{}{location}", self.base)
        }
    }

    /// Whether `url` is on the registry itself (its scheme and host compared without case, as URLs
    /// compare them): only there do credentials go.
    fn same_origin(&self, url: &str) -> bool {
        starts_with_ignoring_case(url, &format!("{}/", self.base))
    }

    /// Refuses a token realm that credentials must not be sent to: anything but HTTPS, except plain
    /// HTTP to a host listed plain. The realm is parsed as a URL rather than matched by prefix, so
    /// that `HTTP://` (schemes are case-insensitive) is plain HTTP too.
    fn check_realm(&self, realm: &str) -> Result<(), String> {
        let uri = realm.parse::<http::Uri>().map_err(|e| {
            format!("the Bearer token realm {realm:?} is not a URL ({e}): no credentials or token are asked for over it")
        })?;
        match uri.scheme() {
            Some(scheme) if *scheme == http::uri::Scheme::HTTPS => return Ok(()),
            Some(scheme) if *scheme == http::uri::Scheme::HTTP => {}
            _ => {
                return Err(format!(
                    "the Bearer token realm {realm:?} is not an HTTPS URL: no credentials or token are asked for over it"
                ))
            }
        }
        let host = format!(
            "{}:{}",
            uri.host().unwrap_or(""),
            uri.port_u16().unwrap_or(80)
        );
        let listed = self.plain_hosts.iter().any(|h| {
            h.eq_ignore_ascii_case(&host) || format!("{h}:80").eq_ignore_ascii_case(&host)
        });
        if listed {
            return Ok(());
        }
        Err(format!(
            "the Bearer token realm {realm} is plain HTTP and {host} is not listed in {}: no credentials or token are asked for over it (serve the realm over HTTPS, or list its host:port)",
            PLAIN_HTTP_ENV
        ))
    }

    /// One exchange, authenticating once when asked to and following a blob's redirects; the answer
    /// (whatever its status) read within `limit` bytes (an error answer within [`MAX_ERROR_ANSWER`]).
    async fn exchange(
        &self,
        method: &str,
        url: &str,
        headers: &[(&str, &str)],
        body: Bytes,
        limit: u64,
    ) -> Result<Answer, RegistryError> {
        let mut url = url.to_string();
        let mut authenticated = false;
        let mut redirects = 0;
        loop {
            // Credentials go to the registry only, never to where it redirects.
            let same_origin = self.same_origin(&url);
            let authorization = if same_origin {
                self.authorization.lock().await.clone()
            } else {
                None
            };
            let answer = self
                .once(method, &url, headers, body.clone(), limit, authorization)
                .await?;
            match answer.status {
                401 if same_origin && !authenticated => {
                    authenticated = true;
                    let challenge = answer
                        .headers
                        .get("www-authenticate")
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or("")
                        .to_string();
                    self.authenticate(&challenge, &url).await?;
                }
                301 | 302 | 303 | 307 | 308
                    if matches!(method, "GET" | "HEAD") && redirects < MAX_REDIRECTS =>
                {
                    redirects += 1;
                    let location = answer
                        .headers
                        .get(LOCATION)
                        .and_then(|v| v.to_str().ok())
                        .ok_or_else(|| {
                            RegistryError::Refused(format!(
                                "{method} {url}: a redirect without a location"
                            ))
                        })?;
                    url = self.absolute(location);
                }
                _ => return Ok(answer),
            }
        }
    }

    /// Answers a `401`'s challenge: Basic with the credentials, Bearer with a token from its realm.
    async fn authenticate(&self, challenge: &str, url: &str) -> Result<(), RegistryError> {
        let refused = |why: String| RegistryError::Refused(format!("{url}: {why}"));
        let challenges = http_auth::parse_challenges(challenge).map_err(|e| {
            refused(format!(
                "the registry asks for authentication with a header that cannot be read ({e})"
            ))
        })?;
        let param = |c: &http_auth::ChallengeRef<'_>, name: &str| {
            c.params
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.to_unescaped())
        };
        if let Some(bearer) = challenges
            .iter()
            .find(|c| c.scheme.eq_ignore_ascii_case("bearer"))
        {
            let realm = param(bearer, "realm").ok_or_else(|| {
                refused("the registry's Bearer challenge names no realm".to_string())
            })?;
            let value = self
                .bearer_token(&realm, param(bearer, "service"), url)
                .await?;
            *self.authorization.lock().await = Some(value);
            return Ok(());
        }
        if challenges
            .iter()
            .any(|c| c.scheme.eq_ignore_ascii_case("basic"))
        {
            let Some(credentials) = &self.credentials else {
                return Err(refused(
                    "the registry asks for credentials (HTTP 401) and none are configured for it"
                        .to_string(),
                ));
            };
            let value = HeaderValue::from_str(&credentials.basic()).map_err(|_| {
                refused("the credentials cannot be sent as a header value".to_string())
            })?;
            *self.authorization.lock().await = Some(value);
            return Ok(());
        }
        Err(refused(format!(
            "the registry answers 401 and asks for no Basic or Bearer authentication ({challenge:?})"
        )))
    }

    /// A Bearer token from the token service at `realm` for this repository (with the credentials,
    /// if any), as the `Authorization` header's value.
    async fn bearer_token(
        &self,
        realm: &str,
        service: Option<String>,
        url: &str,
    ) -> Result<HeaderValue, RegistryError> {
        let refused = |why: String| RegistryError::Refused(format!("{url}: {why}"));
        // The registry's scheme rules hold for its realm too: plain HTTP only to a host listed plain.
        self.check_realm(realm).map_err(refused)?;
        let mut query = form_query(&[(
            "scope",
            &format!("repository:{}:{}", self.repository, self.actions),
        )]);
        if let Some(service) = service {
            query = format!("{query}&{}", form_query(&[("service", &service)]));
        }
        let separator = if realm.contains('?') { '&' } else { '?' };
        let token_url = format!("{realm}{separator}{query}");
        let basic = self.credentials.as_ref().map(Credentials::basic);
        let basic = basic.and_then(|b| HeaderValue::from_str(&b).ok());
        let answer = self
            .once(
                "GET",
                &token_url,
                &[],
                Bytes::new(),
                MAX_TOKEN_ANSWER,
                basic,
            )
            .await?;
        if answer.status != 200 {
            let with = match &self.credentials {
                Some(c) => format!("with the credentials of {}", c.username),
                None => "without credentials (none are configured for it)".to_string(),
            };
            return Err(refused(format!(
                "the token service {realm} refused a token {with}: HTTP {}",
                answer.status
            )));
        }
        let token: serde_json::Value = serde_json::from_slice(&answer.body)
            .map_err(|e| refused(format!("the token service {realm} answered no JSON: {e}")))?;
        let token = token
            .get("token")
            .or_else(|| token.get("access_token"))
            .and_then(serde_json::Value::as_str)
            .ok_or_else(|| refused(format!("the token service {realm} gave no token")))?;
        HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| {
            refused(format!(
                "the token service {realm} gave a token that is not a header value"
            ))
        })
    }

    /// One request and its answer, within the timeout and the cap.
    async fn once(
        &self,
        method: &str,
        url: &str,
        headers: &[(&str, &str)],
        body: Bytes,
        limit: u64,
        authorization: Option<HeaderValue>,
    ) -> Result<Answer, RegistryError> {
        let what = format!("{method} {}", shown(url));
        let request = request(method, url, headers, body, authorization)
            .map_err(|e| RegistryError::Refused(format!("{what}: cannot be sent: {e}")))?;
        let exchange = async {
            let response = crate::network::send(request, &what)
                .await
                .map_err(RegistryError::Unreachable)?;
            read_answer(response, method, limit, &what).await
        };
        match tokio::time::timeout(self.timeout, exchange).await {
            Ok(answer) => answer,
            Err(_) => Err(RegistryError::Unreachable(format!(
                "{what}: no complete answer within {}",
                humantime::format_duration(self.timeout)
            ))),
        }
    }
}

/// The request, with its headers, authorization and body (a length and a type for a body).
fn request(
    method: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: Bytes,
    authorization: Option<HeaderValue>,
) -> Result<hyper::Request<Full<Bytes>>, hyper::http::Error> {
    let mut builder = hyper::Request::builder().method(method).uri(url);
    for (name, value) in headers {
        builder = builder.header(*name, *value);
    }
    if let Some(authorization) = authorization {
        builder = builder.header(AUTHORIZATION, authorization);
    }
    if !body.is_empty() || matches!(method, "PUT" | "POST") {
        builder = builder.header(CONTENT_LENGTH, body.len());
        if !headers
            .iter()
            .any(|(n, _)| n.eq_ignore_ascii_case("content-type"))
        {
            builder = builder.header(CONTENT_TYPE, "application/octet-stream");
        }
    }
    builder.body(Full::new(body))
}

/// An answer's status, headers and body, the body read within `limit` (an error's within
/// [`MAX_ERROR_ANSWER`]; a HEAD's not at all).
async fn read_answer(
    response: hyper::Response<hyper::body::Incoming>,
    method: &str,
    limit: u64,
    what: &str,
) -> Result<Answer, RegistryError> {
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    // An error's body is read within its own small cap: only its message is wanted.
    let limit = if (200..300).contains(&status) {
        limit
    } else {
        MAX_ERROR_ANSWER
    };
    let too_large = || {
        RegistryError::TooLarge(format!(
            "{what}: the answer is larger than the {limit} bytes allowed; refused"
        ))
    };
    let declared = headers
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if method == "HEAD" {
        return Ok(Answer {
            status,
            headers,
            body: Bytes::new(),
        });
    }
    if declared.is_some_and(|length| length > limit) {
        return Err(too_large());
    }
    let cap = usize::try_from(limit).unwrap_or(usize::MAX);
    let body = Limited::new(response.into_body(), cap)
        .collect()
        .await
        .map_err(|e| {
            if e.downcast_ref::<http_body_util::LengthLimitError>()
                .is_some()
            {
                too_large()
            } else {
                RegistryError::Unreachable(format!("{what}: reading the answer: {e}"))
            }
        })?
        .to_bytes();
    Ok(Answer {
        status,
        headers,
        body,
    })
}

/// The Docker schema 2 manifest type, accepted alongside OCI's (some registries label OCI-shaped
/// manifests with it).
const DOCKER_MANIFEST: &str = "application/vnd.docker.distribution.manifest.v2+json";

/// Whether `text` begins with `prefix`, ASCII case aside (URL schemes and host names).
fn starts_with_ignoring_case(text: &str, prefix: &str) -> bool {
    text.as_bytes()
        .get(..prefix.len())
        .is_some_and(|start| start.eq_ignore_ascii_case(prefix.as_bytes()))
}

/// A URL for messages: without its query (an upload location's state, a token request's scope).
fn shown(url: &str) -> &str {
    url.split('?').next().unwrap_or(url)
}

/// `name=value&…`, form-encoded.
fn form_query(pairs: &[(&str, &str)]) -> String {
    pairs
        .iter()
        .map(|(k, v)| format!("{}={}", encode(k), encode(v)))
        .collect::<Vec<_>>()
        .join("&")
}

fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Ok when the answer's status is one of `ok`, else an error with the registry's own message.
fn expect(answer: &Answer, ok: &[u16], what: &str) -> Result<(), RegistryError> {
    if ok.contains(&answer.status) {
        return Ok(());
    }
    // The distribution API's errors: {"errors": [{"code", "message", "detail"}]}.
    let detail = serde_json::from_slice::<serde_json::Value>(&answer.body)
        .ok()
        .and_then(|v| {
            let errors = v.get("errors")?.as_array()?.clone();
            Some(
                errors
                    .iter()
                    .map(|e| {
                        format!(
                            "{} {}",
                            e.get("code").and_then(|c| c.as_str()).unwrap_or(""),
                            e.get("message").and_then(|c| c.as_str()).unwrap_or("")
                        )
                    })
                    .collect::<Vec<_>>()
                    .join("; "),
            )
        })
        .map(|d| format!(": {}", d.trim()))
        .unwrap_or_default();
    Err(RegistryError::Refused(format!(
        "{what}: HTTP {}{detail}",
        answer.status
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn registry(plain_hosts: &[String]) -> Registry {
        let reference = Reference::parse("registry.example:5000/mods/m:1").unwrap();
        let credentials = Credentials {
            username: "puller".into(),
            password: "secret".into(),
        };
        Registry::new(
            &reference,
            false,
            Some(credentials),
            Duration::from_secs(2),
            false,
        )
        .with_plain_hosts(plain_hosts)
    }

    /// URL schemes are case-insensitive: a realm written `HTTP://` or `Http://` is plain HTTP, and on a
    /// host not listed plain it is refused before anything (the pull secret's Basic credentials
    /// first) is sent to it.
    #[tokio::test]
    async fn a_plain_realm_in_any_case_on_an_unlisted_host_gets_no_credentials() {
        let realm = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        realm.set_nonblocking(true).unwrap();
        let host = realm.local_addr().unwrap().to_string();
        let registry = registry(&[]);
        for scheme in ["HTTP", "Http", "hTTp"] {
            let url = format!("{scheme}://{host}/token");
            let error = registry
                .bearer_token(
                    &url,
                    None,
                    "https://registry.example:5000/v2/mods/m/manifests/1",
                )
                .await
                .unwrap_err();
            let message = error.to_string();
            assert!(
                matches!(error, RegistryError::Refused(_))
                    && message.contains(&format!(
                        "the Bearer token realm {url} is plain HTTP and {host} is not listed in {PLAIN_HTTP_ENV}"
                    )),
                "{message}"
            );
            assert!(realm.accept().is_err(), "{url} was asked for a token");
        }
        // Not HTTP(S) at all, or no URL: refused as well.
        for url in ["ftp://example.org/token", "/token"] {
            let message = registry.check_realm(url).unwrap_err();
            assert!(message.contains("is not an HTTPS URL"), "{message}");
        }
        // Listed plain (host names compare without case too), or HTTPS in any case: allowed.
        let listed = self::registry(&["Tokens.Example:8080".to_string()]);
        assert_eq!(
            listed.check_realm("HTTP://tokens.example:8080/token"),
            Ok(())
        );
        assert!(listed
            .check_realm("HTTP://tokens.example:8081/token")
            .is_err());
        assert_eq!(registry.check_realm("HTTPS://auth.example/token"), Ok(()));
    }

    /// A redirect's location with an upper-case scheme is absolute (not appended to the registry's
    /// base), and the registry's own URLs are its origin whatever their case.
    #[test]
    fn locations_and_origins_compare_schemes_without_case() {
        let registry = registry(&[]);
        assert_eq!(
            registry.absolute("HTTPS://blobs.example/b?sig=1"),
            "HTTPS://blobs.example/b?sig=1"
        );
        assert_eq!(
            registry.absolute("Http://blobs.example/b"),
            "Http://blobs.example/b"
        );
        assert_eq!(
            registry.absolute("/v2/mods/m/blobs/x"),
            "https://registry.example:5000/v2/mods/m/blobs/x"
        );
        assert!(registry.same_origin("HTTPS://Registry.Example:5000/v2/mods/m/blobs/x"));
        assert!(!registry.same_origin("http://registry.example:5000/v2/mods/m/blobs/x"));
        assert!(!registry.same_origin("https://registry.example:50001/v2/"));
    }
}
