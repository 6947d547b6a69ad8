//! The remote flows (STS, Entra ID token, Get User Delegation Key) against a fake transport: what is
//! sent, how answers are read, and that errors never carry a secret.
// Helpers of these tests may unwrap too: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::cell::RefCell;

use signing::aad::{self, Identity, Secret};
use signing::azure::Sas;
use signing::s3::Presign;
use signing::sts::WebIdentity;
use signing::transport::{Request, Response};
use signing::{azure_sas, presign_s3, AwsCredentials, AzureCredentials, Error, UtcTime};

const TOKEN: &str = "eyJ-web-identity-token-secret";

fn identity() -> WebIdentity {
    WebIdentity {
        role_arn: "arn:aws:iam::123456789012:role/velero".into(),
        token: TOKEN.into(),
        session_name: "restore-example".into(),
        endpoint: None,
    }
}

fn presign_request() -> Presign {
    Presign {
        bucket: "b".into(),
        key: "k".into(),
        region: "us-east-1".into(),
        ..Presign::default()
    }
}

const STS_OK: &str = "<AssumeRoleWithWebIdentityResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\"><AssumeRoleWithWebIdentityResult><Credentials><AccessKeyId>ASIATEMP</AccessKeyId><SecretAccessKey>tempsecret</SecretAccessKey><SessionToken>tempsession/token+=</SessionToken></Credentials></AssumeRoleWithWebIdentityResult></AssumeRoleWithWebIdentityResponse>";

fn answer(status: u16, body: &str) -> impl Fn(Request) -> Result<Response, String> {
    let body = body.to_string();
    move |_| {
        Ok(Response {
            status,
            body: body.clone().into_bytes(),
        })
    }
}

#[test]
fn sts_sends_the_sorted_form_and_signs_with_the_session_token() {
    let sent = RefCell::new(Vec::new());
    let transport = |request: Request| {
        sent.borrow_mut().push(request);
        Ok(Response {
            status: 200,
            body: STS_OK.as_bytes().to_vec(),
        })
    };
    let now = UtcTime::from_unix(1_775_649_600).unwrap();
    let url = presign_s3(
        &transport,
        &presign_request(),
        &AwsCredentials::WebIdentity(identity()),
        &now,
    )
    .unwrap();
    assert!(url.contains("X-Amz-Credential=ASIATEMP%2F"), "{url}");
    assert!(
        url.contains("X-Amz-Security-Token=tempsession%2Ftoken%2B%3D"),
        "{url}"
    );
    let sent = sent.into_inner();
    assert_eq!(sent.len(), 1);
    assert_eq!(
        (sent[0].method, sent[0].url.as_str()),
        ("POST", "https://sts.amazonaws.com")
    );
    assert_eq!(
        String::from_utf8(sent[0].body.clone()).unwrap(),
        "Action=AssumeRoleWithWebIdentity&DurationSeconds=3600&RoleArn=arn%3Aaws%3Aiam%3A%3A123456789012%3Arole%2Fvelero&RoleSessionName=restore-example&Version=2011-06-15&WebIdentityToken=eyJ-web-identity-token-secret"
    );
}

#[test]
fn an_empty_session_name_sends_the_default() {
    let request = signing::sts::request(&WebIdentity {
        session_name: String::new(),
        ..identity()
    })
    .unwrap();
    assert!(String::from_utf8(request.body)
        .unwrap()
        .contains("RoleSessionName=hypershift-oadp"));
}

#[test]
fn sts_failures_are_clear_and_never_quote_the_token() {
    let now = UtcTime::from_unix(1_775_649_600).unwrap();
    let run = |transport: &dyn signing::transport::Transport| {
        presign_s3(
            transport,
            &presign_request(),
            &AwsCredentials::WebIdentity(identity()),
            &now,
        )
        .unwrap_err()
    };
    let e = run(&answer(
        403,
        &format!("<Error><Message>Token {TOKEN} expired</Message></Error>"),
    ));
    assert!(matches!(e, Error::Remote(_)));
    let text = e.to_string();
    assert!(
        text.starts_with("error assuming role via STS: STS returned HTTP 403: "),
        "{text}"
    );
    assert!(
        !text.contains(TOKEN) && text.contains("[redacted]"),
        "{text}"
    );
    let e = run(&answer(200, "<not xml")).to_string();
    assert!(e.contains("failed to parse STS XML response"), "{e}");
    for missing in ["AccessKeyId", "SecretAccessKey", "SessionToken"] {
        let body = STS_OK
            .replace(&format!("<{missing}>"), "<Other>")
            .replace(&format!("</{missing}>"), "</Other>");
        assert!(
            run(&answer(200, &body))
                .to_string()
                .contains("STS response missing credentials"),
            "{missing}"
        );
    }
    let e = run(&|_: Request| -> Result<Response, String> { Err("connection refused".into()) });
    assert_eq!(
        e,
        Error::Transport(
            "error assuming role via STS: STS request failed: connection refused".into()
        )
    );
    let e = presign_s3(
        &answer(200, STS_OK),
        &presign_request(),
        &AwsCredentials::WebIdentity(WebIdentity {
            token: String::new(),
            ..identity()
        }),
        &now,
    );
    assert!(matches!(e, Err(Error::Invalid(_))));
}

fn aad_identity(secret: Secret) -> Identity {
    Identity {
        tenant_id: "tid-5678".into(),
        client_id: "client-1".into(),
        secret,
        cloud_name: String::new(),
        authority: None,
    }
}

const KEY_XML: &str = "<?xml version=\"1.0\" encoding=\"utf-8\"?><UserDelegationKey><SignedOid>oid-1234</SignedOid><SignedTid>tid-5678</SignedTid><SignedStart>2026-05-08T12:00:00Z</SignedStart><SignedExpiry>2026-05-08T13:00:00Z</SignedExpiry><SignedService>b</SignedService><SignedVersion>2024-11-04</SignedVersion><Value>dGVzdC1kZWxlZ2F0aW9uLWtleS12YWx1ZSEhISE=</Value></UserDelegationKey>";

fn sas() -> Sas {
    Sas {
        account: "myaccount".into(),
        container: "mycontainer".into(),
        blob: "path/to/snapshot.db".into(),
        permissions: "r".into(),
        ..Sas::default()
    }
}

/// Runs the user delegation flow for `secret` against endpoints that answer `token` to any token
/// request and AZ-3's key to Get User Delegation Key; returns the URL and the requests sent.
fn delegation_flow(secret: Secret, token: &str) -> (String, Vec<Request>) {
    let sent = RefCell::new(Vec::new());
    let transport = |request: Request| {
        let body = if request.url.contains("oauth2") {
            token
        } else {
            KEY_XML
        };
        sent.borrow_mut().push(request);
        Ok(Response {
            status: 200,
            body: body.as_bytes().to_vec(),
        })
    };
    let now = UtcTime::from_unix(1_778_241_600).unwrap();
    let credentials = AzureCredentials::Aad(aad_identity(secret));
    let url = azure_sas(&transport, &sas(), &credentials, &now).unwrap();
    (url, sent.into_inner())
}

#[test]
fn aad_flow_gets_a_token_then_a_key_then_signs() {
    let (url, sent) = delegation_flow(
        Secret::ClientSecret("client-secret-value".into()),
        r#"{"token_type":"Bearer","expires_in":3599,"access_token":"test-token"}"#,
    );
    // The key of AZ-3, so the URL is AZ-3's.
    assert!(
        url.contains("sig=frr2rIC4bJTT%2B4xR%2BrEEo%2BbRUExuXitvUxu1pqAvO94%3D"),
        "{url}"
    );
    assert_eq!(
        sent[0].url,
        "https://login.microsoftonline.com/tid-5678/oauth2/v2.0/token"
    );
    assert_eq!(
        String::from_utf8(sent[0].body.clone()).unwrap(),
        "client_id=client-1&client_secret=client-secret-value&grant_type=client_credentials&scope=https%3A%2F%2Fstorage.azure.com%2F.default"
    );
    assert_eq!(
        sent[1].url,
        "https://myaccount.blob.core.windows.net/?restype=service&comp=userdelegationkey"
    );
    assert!(sent[1]
        .headers
        .contains(&("Authorization".into(), "Bearer test-token".into())));
    assert!(sent[1]
        .headers
        .contains(&("x-ms-version".into(), "2024-11-04".into())));
    assert_eq!(
        String::from_utf8(sent[1].body.clone()).unwrap(),
        "<KeyInfo><Start>2026-05-08T12:00:00Z</Start><Expiry>2026-05-08T13:00:00Z</Expiry></KeyInfo>"
    );
}

#[test]
fn clouds_choose_authority_and_scope() {
    assert_eq!(
        aad::authority(" AzureUSGovernmentCloud "),
        "https://login.microsoftonline.us/"
    );
    assert_eq!(
        aad::authority("AzureChinaCloud"),
        "https://login.chinacloudapi.cn/"
    );
    assert_eq!(aad::authority(""), "https://login.microsoftonline.com/");
    assert_eq!(
        aad::storage_scope("azurechinacloud"),
        "https://storage.azure.cn/.default"
    );
    assert_eq!(
        aad::storage_scope("AzureUSGovernmentCloud"),
        "https://storage.azure.com/.default"
    );
    let request = aad::token_request(&aad_identity(Secret::FederatedToken("fed".into())))
        .unwrap()
        .unwrap();
    let body = String::from_utf8(request.body).unwrap();
    assert!(
        body.contains("client_assertion=fed") && body.contains("jwt-bearer"),
        "{body}"
    );
}

#[test]
fn a_managed_identity_asks_imds_for_the_storage_resource() {
    let imds = |client: &str, cloud: &str, endpoint: Option<&str>| {
        let identity = Identity {
            tenant_id: String::new(),
            client_id: client.into(),
            secret: Secret::ManagedIdentity(endpoint.map(str::to_string)),
            cloud_name: cloud.into(),
            authority: None,
        };
        aad::token_request(&identity).unwrap().unwrap()
    };
    let request = imds("client-1", "", None);
    assert_eq!(
        (request.method, request.url.as_str()),
        (
            "GET",
            "http://169.254.169.254/metadata/identity/oauth2/token?api-version=2018-02-01&client_id=client-1&resource=https%3A%2F%2Fstorage.azure.com"
        )
    );
    assert_eq!(
        request.headers,
        [("Metadata".to_string(), "true".to_string())]
    );
    assert!(request.body.is_empty());
    // No tenant is needed; without a client id the node's only identity answers; China has its own
    // resource; an endpoint override (tests, proxies of IMDS) replaces the address.
    assert_eq!(
        imds("", "AzureChinaCloud", Some("http://127.0.0.1:8080/")).url,
        "http://127.0.0.1:8080/metadata/identity/oauth2/token?api-version=2018-02-01&resource=https%3A%2F%2Fstorage.azure.cn"
    );

    // The whole flow: IMDS's token, then the delegation key, then AZ-3's URL.
    let (url, sent) = delegation_flow(
        Secret::ManagedIdentity(None),
        r#"{"access_token":"imds-token","expires_in":"86399","resource":"https://storage.azure.com","token_type":"Bearer"}"#,
    );
    assert!(sent[0]
        .url
        .starts_with("http://169.254.169.254/metadata/identity/oauth2/token?"));
    assert!(
        url.contains("sig=frr2rIC4bJTT%2B4xR%2BrEEo%2BbRUExuXitvUxu1pqAvO94%3D"),
        "{url}"
    );
    assert!(sent[1]
        .headers
        .contains(&("Authorization".into(), "Bearer imds-token".into())));
}

#[test]
fn delegation_failures_are_clear_and_never_quote_secrets() {
    let now = UtcTime::from_unix(1_778_241_600).unwrap();
    let credentials = AzureCredentials::Aad(aad_identity(Secret::AccessToken(
        "bearer-secret-token".into(),
    )));
    for (status, body, expected) in [
        (
            403,
            "AuthorizationPermissionMismatch for bearer-secret-token",
            "Get User Delegation Key returned 403",
        ),
        (500, "oops", "Get User Delegation Key returned 500"),
        (200, "not xml at all", "parsing delegation key response"),
    ] {
        let e = azure_sas(&answer(status, body), &sas(), &credentials, &now)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("error getting user delegation key: ") && e.contains(expected),
            "{e}"
        );
        assert!(!e.contains("bearer-secret-token"), "{e}");
    }
    let credentials = AzureCredentials::Aad(aad_identity(Secret::ClientSecret(
        "client-secret-value".into(),
    )));
    let e = azure_sas(
        &answer(
            401,
            r#"{"error":"invalid_client","error_description":"bad client-secret-value"}"#,
        ),
        &sas(),
        &credentials,
        &now,
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.starts_with("error acquiring AAD token for storage: token endpoint returned 401"),
        "{e}"
    );
    assert!(!e.contains("client-secret-value"), "{e}");
    let e = azure_sas(&answer(200, "{not json"), &sas(), &credentials, &now)
        .unwrap_err()
        .to_string();
    assert!(e.contains("parsing token response"), "{e}");
}
