//! The known-answer vectors of docs/signing.md#s6-10, on the signing core and on whole URLs.
// Helpers of these tests may unwrap too: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_sigv4::sign::v4;
use sha2::{Digest, Sha256};
use signing::azure::{self, DelegationKey, Sas};
use signing::s3::{self, Keys, Presign, Target};
use signing::UtcTime;

const AKID: &str = "AKIAIOSFODNN7EXAMPLE";
const SECRET: &str = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
/// 2026-04-08T12:00:00Z.
const S3_NOW: i64 = 1_775_649_600;
/// 2026-05-08T12:00:00Z.
const AZ_NOW: i64 = 1_778_241_600;

fn keys(token: &str) -> Keys {
    Keys {
        access_key_id: AKID.into(),
        secret_access_key: SECRET.into(),
        session_token: token.into(),
    }
}

fn s3_1() -> Presign {
    Presign {
        bucket: "my-bucket".into(),
        key: "path/to/snapshot.db".into(),
        region: "us-east-1".into(),
        expires: 3600,
        ..Presign::default()
    }
}

fn presign(request: &Presign, token: &str) -> String {
    s3::presign(request, &keys(token), &UtcTime::from_unix(S3_NOW).unwrap()).unwrap()
}

/// The time `now` as the crate takes it.
fn system_time(unix: i64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(unix as u64)
}

/// The value of `name` in a URL's query.
fn param<'a>(url: &'a str, name: &str) -> &'a str {
    let query = url.split_once('?').map_or("", |(_, q)| q);
    query
        .split('&')
        .find_map(|p| p.strip_prefix(name)?.strip_prefix('='))
        .unwrap_or_else(|| panic!("{name} not in {url}"))
}

#[test]
fn aws_docs_presign_example() {
    // AWS S3 API Reference, "Authenticating Requests: Using Query Parameters", section Example. It
    // uses the global host, which `target` never chooses, so the target is given as is.
    let now = UtcTime::from_unix(1_369_353_600).unwrap();
    assert_eq!(now.basic(), "20130524T000000Z");
    let target = Target {
        scheme: "https".into(),
        host: "examplebucket.s3.amazonaws.com".into(),
        path: "/test.txt".into(),
    };
    assert_eq!(
        s3::presign_target(&target, "us-east-1", &keys(""), &now, 86400).unwrap(),
        "https://examplebucket.s3.amazonaws.com/test.txt?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400&X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404&X-Amz-SignedHeaders=host"
    );
}

#[test]
fn aws_docs_signing_key_derivation() {
    // AWS General Reference, "Examples of how to derive a signing key for Signature Version 4". The
    // crate derives the key in one call, so kSigning is checked (kDate, kRegion, kService are
    // intermediate values it does not expose).
    let key = v4::generate_signing_key(
        "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
        system_time(1_329_264_000), // 2012-02-15
        "us-east-1",
        "iam",
    );
    assert_eq!(
        hex(key.as_ref()),
        "f4780e2d9f65fa895f9c67b32ce1baf0b0d8a43505a000a1a9e090d414db404d"
    );
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// S3-1's canonical request and string to sign are those of docs/signing.md#s6-10: the signature in the
/// URL is the signature of that string to sign, whose last line is the hash of that canonical
/// request (the crate does not expose either text, so they are checked through the signature).
#[test]
fn s3_1_canonical_request_string_to_sign_and_url() {
    let target = s3::target(&s3_1()).unwrap();
    let canonical = format!(
        "GET\n{}\nX-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20260408%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20260408T120000Z&X-Amz-Expires=3600&X-Amz-SignedHeaders=host\nhost:{}\n\nhost\nUNSIGNED-PAYLOAD",
        target.path, target.host
    );
    assert_eq!(
        canonical,
        "GET\n/path/to/snapshot.db\nX-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20260408%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20260408T120000Z&X-Amz-Expires=3600&X-Amz-SignedHeaders=host\nhost:my-bucket.s3.us-east-1.amazonaws.com\n\nhost\nUNSIGNED-PAYLOAD"
    );
    let to_sign = "AWS4-HMAC-SHA256\n20260408T120000Z\n20260408/us-east-1/s3/aws4_request\ne3cbc835de9b4f4f5e55c574c8da39fa918c00e18cfaa8f249d1c5bbd1f3d30b";
    assert_eq!(
        format!(
            "AWS4-HMAC-SHA256\n20260408T120000Z\n20260408/us-east-1/s3/aws4_request\n{}",
            hex(&Sha256::digest(canonical.as_bytes()))
        ),
        to_sign
    );
    let url = "https://my-bucket.s3.us-east-1.amazonaws.com/path/to/snapshot.db?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20260408%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20260408T120000Z&X-Amz-Expires=3600&X-Amz-Signature=97094fa9811681974b61253db47e92787f66a5c394200e6e0db7c1b69adbd9a0&X-Amz-SignedHeaders=host";
    assert_eq!(presign(&s3_1(), ""), url);
    let key = v4::generate_signing_key(SECRET, system_time(S3_NOW), "us-east-1", "s3");
    assert_eq!(
        v4::calculate_signature(key, to_sign.as_bytes()),
        param(url, "X-Amz-Signature")
    );
    // Expiry 0 means the default, 3600.
    assert_eq!(
        presign(
            &Presign {
                expires: 0,
                ..s3_1()
            },
            ""
        ),
        url
    );
}

#[test]
fn s3_2_session_token() {
    assert_eq!(
        presign(&s3_1(), "FwoGZXIvYXdzEBYaDHqa0AP"),
        "https://my-bucket.s3.us-east-1.amazonaws.com/path/to/snapshot.db?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20260408%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20260408T120000Z&X-Amz-Expires=3600&X-Amz-Security-Token=FwoGZXIvYXdzEBYaDHqa0AP&X-Amz-Signature=b2cea8ee4dff0adbb14368202d85d4070be0135050b68f9cd5508aac0104980e&X-Amz-SignedHeaders=host"
    );
}

#[test]
fn s3_3_path_style() {
    assert_eq!(
        presign(&Presign { force_path_style: true, ..s3_1() }, ""),
        "https://s3.us-east-1.amazonaws.com/my-bucket/path/to/snapshot.db?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20260408%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20260408T120000Z&X-Amz-Expires=3600&X-Amz-Signature=0e6edd41044bf957fbe146ec2a068ce322ef988fb60e5d010d5945c7f5c65a8c&X-Amz-SignedHeaders=host"
    );
}

#[test]
fn s3_4_custom_endpoint() {
    assert_eq!(
        presign(&Presign { endpoint: Some("http://minio.example.com:9000/".into()), ..s3_1() }, ""),
        "http://minio.example.com:9000/my-bucket/path/to/snapshot.db?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20260408%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20260408T120000Z&X-Amz-Expires=3600&X-Amz-Signature=9b0544302dfa5b8251077cfd536eceb9b3f196b5d02a2fad820c067c40986013&X-Amz-SignedHeaders=host"
    );
}

#[test]
fn s3_5_key_encoding() {
    assert_eq!(
        presign(&Presign { key: "datos/café/snap shot#1.db".into(), ..s3_1() }, ""),
        "https://my-bucket.s3.us-east-1.amazonaws.com/datos/caf%C3%A9/snap%20shot%231.db?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20260408%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20260408T120000Z&X-Amz-Expires=3600&X-Amz-Signature=0a6ea44de1aac9b0a641095532fc1909f8c0a6e8077ab4aa89254f2128fcbd2e&X-Amz-SignedHeaders=host"
    );
}

#[test]
fn s3_6_token_encoding() {
    let request = Presign {
        bucket: "my-oadp-bucket".into(),
        key: "velero/backups/hcp-aws-backup/etcd-backup/1775575637.db".into(),
        region: "eu-west-1".into(),
        expires: 3600,
        ..Presign::default()
    };
    assert_eq!(
        presign(&request, "IQoJb3JpZ2luX2VjEJr//////////wEaCXVzLWVhc3QtMSJHMEUCIQ+abc="),
        "https://my-oadp-bucket.s3.eu-west-1.amazonaws.com/velero/backups/hcp-aws-backup/etcd-backup/1775575637.db?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20260408%2Feu-west-1%2Fs3%2Faws4_request&X-Amz-Date=20260408T120000Z&X-Amz-Expires=3600&X-Amz-Security-Token=IQoJb3JpZ2luX2VjEJr%2F%2F%2F%2F%2F%2F%2F%2F%2F%2FwEaCXVzLWVhc3QtMSJHMEUCIQ%2Babc%3D&X-Amz-Signature=e3fd858f8e54f98caa462314a3a1b1c673a09b65e87c85bd2a299fb4ebc95065&X-Amz-SignedHeaders=host"
    );
}

#[test]
fn s3_validation_uses_the_spec_texts() {
    let now = UtcTime::from_unix(S3_NOW).unwrap();
    let e = s3::presign(
        &Presign {
            region: String::new(),
            ..s3_1()
        },
        &keys(""),
        &now,
    )
    .unwrap_err();
    assert_eq!(e.to_string(), "bucket, key, and region are required");
    let e = s3::presign(
        &s3_1(),
        &Keys {
            secret_access_key: String::new(),
            ..keys("")
        },
        &now,
    )
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "access key ID and secret access key are required"
    );
    let e = s3::presign(
        &Presign {
            endpoint: Some("minio.example.com:9000".into()),
            ..s3_1()
        },
        &keys(""),
        &now,
    )
    .unwrap_err();
    assert!(
        e.to_string()
            .starts_with("invalid endpoint \"minio.example.com:9000\""),
        "{e}"
    );
}

const ACCOUNT_KEY: &str = "dGVzdC1zdG9yYWdlLWFjY291bnQta2V5LXZhbHVlISE=";

fn az(blob: &str) -> Sas {
    Sas {
        account: "myaccount".into(),
        container: "mycontainer".into(),
        blob: blob.into(),
        permissions: "r".into(),
        expires: 3600,
        ..Sas::default()
    }
}

#[test]
fn az_1_service_sas() {
    assert_eq!(
        azure::service_string_to_sign(
            "r",
            "2026-05-08T12:00:00Z",
            "2026-05-08T13:00:00Z",
            "/blob/myaccount/mycontainer/path/to/snapshot.db"
        ),
        "r␤2026-05-08T12:00:00Z␤2026-05-08T13:00:00Z␤/blob/myaccount/mycontainer/path/to/snapshot.db␤␤␤https␤2024-11-04␤b␤␤␤␤␤␤␤".replace('␤', "\n")
    );
    let now = UtcTime::from_unix(AZ_NOW).unwrap();
    assert_eq!(
        azure::service_sas(&az("path/to/snapshot.db"), ACCOUNT_KEY, &now).unwrap(),
        "https://myaccount.blob.core.windows.net/mycontainer/path/to/snapshot.db?se=2026-05-08T13%3A00%3A00Z&sig=fUwIj%2Bwe8o2k5vj4aO7D5sCP2pGwJqESSubk2pyXf10%3D&sp=r&spr=https&sr=b&st=2026-05-08T12%3A00%3A00Z&sv=2024-11-04"
    );
}

/// AZ-2's signature; the URL keeps the endpoint's path, which the original drops (a deliberate
/// difference: see the README).
#[test]
fn az_2_service_sas_with_endpoint() {
    let now = UtcTime::from_unix(AZ_NOW).unwrap();
    let request = Sas {
        endpoint: Some("http://127.0.0.1:10000/devstoreaccount1".into()),
        ..az("path/to/snap shot#1.db")
    };
    assert_eq!(
        azure::service_sas(&request, ACCOUNT_KEY, &now).unwrap(),
        "http://127.0.0.1:10000/devstoreaccount1/mycontainer/path/to/snap%20shot%231.db?se=2026-05-08T13%3A00%3A00Z&sig=iJKFVB%2FfUm3gZO9K4XxFnQ3oiiuxPmcaApESq8aSMbY%3D&sp=r&spr=https&sr=b&st=2026-05-08T12%3A00%3A00Z&sv=2024-11-04"
    );
}

/// The delegation key of AZ-3.
pub fn az_3_key() -> DelegationKey {
    DelegationKey {
        signed_oid: "oid-1234".into(),
        signed_tid: "tid-5678".into(),
        signed_start: "2026-05-08T12:00:00Z".into(),
        signed_expiry: "2026-05-08T13:00:00Z".into(),
        signed_service: "b".into(),
        signed_version: "2024-11-04".into(),
        value: "dGVzdC1kZWxlZ2F0aW9uLWtleS12YWx1ZSEhISE=".into(),
    }
}

#[test]
fn az_3_user_delegation_sas() {
    assert_eq!(
        azure::delegation_string_to_sign(
            "r",
            "2026-05-08T12:00:00Z",
            "2026-05-08T13:00:00Z",
            "/blob/myaccount/mycontainer/path/to/snapshot.db",
            &az_3_key()
        ),
        "r␤2026-05-08T12:00:00Z␤2026-05-08T13:00:00Z␤/blob/myaccount/mycontainer/path/to/snapshot.db␤oid-1234␤tid-5678␤2026-05-08T12:00:00Z␤2026-05-08T13:00:00Z␤b␤2024-11-04␤␤␤␤␤https␤2024-11-04␤b␤␤␤␤␤␤␤".replace('␤', "\n")
    );
    let now = UtcTime::from_unix(AZ_NOW).unwrap();
    assert_eq!(
        azure::delegation_sas(&az("path/to/snapshot.db"), &az_3_key(), &now).unwrap(),
        "https://myaccount.blob.core.windows.net/mycontainer/path/to/snapshot.db?se=2026-05-08T13%3A00%3A00Z&sig=frr2rIC4bJTT%2B4xR%2BrEEo%2BbRUExuXitvUxu1pqAvO94%3D&ske=2026-05-08T13%3A00%3A00Z&skoid=oid-1234&sks=b&skt=2026-05-08T12%3A00%3A00Z&sktid=tid-5678&skv=2024-11-04&sp=r&spr=https&sr=b&st=2026-05-08T12%3A00%3A00Z&sv=2024-11-04"
    );
}

#[test]
fn azure_validation_uses_the_spec_texts() {
    let now = UtcTime::from_unix(AZ_NOW).unwrap();
    let e = azure::service_sas(&az(""), ACCOUNT_KEY, &now).unwrap_err();
    assert_eq!(e.to_string(), "account, container, and blob are required");
    assert_eq!(
        azure::service_sas(&az("b"), "", &now)
            .unwrap_err()
            .to_string(),
        "account key is required"
    );
    let e = azure::service_sas(&az("b"), "not base64!", &now)
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("invalid base64 account key: "), "{e}");
    assert!(!e.contains("not base64!"), "{e}");
    let e = azure::delegation_sas(
        &az("b"),
        &DelegationKey {
            value: "%%%".into(),
            ..az_3_key()
        },
        &now,
    )
    .unwrap_err();
    assert!(
        e.to_string().starts_with("invalid base64 delegation key: "),
        "{e}"
    );
    let e = azure::delegation_sas(
        &az("b"),
        &DelegationKey {
            value: String::new(),
            ..az_3_key()
        },
        &now,
    )
    .unwrap_err();
    assert_eq!(e.to_string(), "delegation key is required");
    let e = azure::service_sas(
        &Sas {
            permissions: "rq".into(),
            ..az("b")
        },
        ACCOUNT_KEY,
        &now,
    )
    .unwrap_err();
    assert!(e.to_string().contains("permissions \"rq\""), "{e}");
}

#[test]
fn keys_decode_leniently_like_go_and_python() {
    // "QQ" has non-zero unused bits in its last symbol: Go's StdEncoding and Python accept it.
    let now = UtcTime::from_unix(AZ_NOW).unwrap();
    assert!(azure::service_sas(&az("b"), "QR==", &now).is_ok());
}
