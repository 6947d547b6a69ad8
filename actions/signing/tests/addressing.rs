//! S3 addressing as the AWS SDKs choose it: virtual-hosted only for a bucket that is one DNS label
//! usable under TLS, path style otherwise; the partition's DNS suffix; the region checked as a DNS
//! name. The whole-URL cases were produced by botocore with the same inputs.
// Helpers of these tests may unwrap too: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use signing::s3::{self, Keys, Presign};
use signing::UtcTime;

/// 2026-04-08T12:00:00Z.
const NOW: i64 = 1_775_649_600;

fn request(bucket: &str, region: &str) -> Presign {
    Presign {
        bucket: bucket.into(),
        key: "path/to/snapshot.db".into(),
        region: region.into(),
        expires: 3600,
        ..Presign::default()
    }
}

fn presign(request: &Presign, token: &str) -> Result<String, signing::Error> {
    let keys = Keys {
        access_key_id: "AKIAIOSFODNN7EXAMPLE".into(),
        secret_access_key: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY".into(),
        session_token: token.into(),
    };
    s3::presign(request, &keys, &UtcTime::from_unix(NOW).unwrap())
}

fn base(bucket: &str, region: &str) -> String {
    let t = s3::target(&request(bucket, region)).unwrap();
    format!("{}://{}{}", t.scheme, t.host, t.path)
}

#[test]
fn a_bucket_that_is_one_lower_case_dns_label_goes_into_the_host() {
    let longest = "a".repeat(63);
    for bucket in ["my-bucket", "123", "xn--abc", "a1b", longest.as_str()] {
        assert!(s3::virtual_hostable(bucket), "{bucket}");
        for region in ["us-east-1", "eu-west-1"] {
            assert_eq!(
                base(bucket, region),
                format!("https://{bucket}.s3.{region}.amazonaws.com/path/to/snapshot.db")
            );
        }
    }
}

#[test]
fn dotted_upper_case_ip_like_and_other_non_dns_bucket_names_are_addressed_path_style() {
    let too_long = "a".repeat(64);
    for bucket in [
        "my.dotted.bucket",
        "MyBucket",
        "192.168.1.1",
        "abc-",
        "-abc",
        "ab",
        "a_b_c",
        "abc..def",
        too_long.as_str(),
    ] {
        assert!(!s3::virtual_hostable(bucket), "{bucket}");
        for region in ["us-east-1", "eu-west-1", "ap-southeast-2"] {
            assert_eq!(
                base(bucket, region),
                format!("https://s3.{region}.amazonaws.com/{bucket}/path/to/snapshot.db")
            );
        }
    }
}

#[test]
fn a_dotted_bucket_gets_botocores_url() {
    assert_eq!(
        presign(&request("my.backup.bucket", "us-east-1"), "").unwrap(),
        "https://s3.us-east-1.amazonaws.com/my.backup.bucket/path/to/snapshot.db?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20260408%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20260408T120000Z&X-Amz-Expires=3600&X-Amz-Signature=21dba156159470693469af8d8883b2bfb5b3baaa67cc0663699f5f053e185e3d&X-Amz-SignedHeaders=host"
    );
    assert_eq!(
        presign(
            &request("Velero-Backups", "eu-west-1"),
            "FwoGZXIvYXdzEBYaDHqa0AP"
        )
        .unwrap(),
        "https://s3.eu-west-1.amazonaws.com/Velero-Backups/path/to/snapshot.db?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20260408%2Feu-west-1%2Fs3%2Faws4_request&X-Amz-Date=20260408T120000Z&X-Amz-Expires=3600&X-Amz-Security-Token=FwoGZXIvYXdzEBYaDHqa0AP&X-Amz-Signature=f77863dcb05e311347b11a9a6b30f723cc5f7576ee22e0a5940a5be9eb5d5ec5&X-Amz-SignedHeaders=host"
    );
}

#[test]
fn a_custom_endpoint_and_forced_path_style_keep_the_bucket_in_the_path() {
    let dotted = Presign {
        endpoint: Some("https://minio.example.com:9443".into()),
        ..request("my.backup.bucket", "us-east-1")
    };
    let t = s3::target(&dotted).unwrap();
    assert_eq!(
        (t.host.as_str(), t.path.as_str()),
        (
            "minio.example.com:9443",
            "/my.backup.bucket/path/to/snapshot.db"
        )
    );
    let forced = Presign {
        force_path_style: true,
        ..request("my-bucket", "eu-west-1")
    };
    let t = s3::target(&forced).unwrap();
    assert_eq!(
        (t.host.as_str(), t.path.as_str()),
        (
            "s3.eu-west-1.amazonaws.com",
            "/my-bucket/path/to/snapshot.db"
        )
    );
}

#[test]
fn china_and_the_isolated_partitions_have_their_own_dns_suffix() {
    assert_eq!(
        presign(&request("my-bucket", "cn-north-1"), "").unwrap(),
        "https://my-bucket.s3.cn-north-1.amazonaws.com.cn/path/to/snapshot.db?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20260408%2Fcn-north-1%2Fs3%2Faws4_request&X-Amz-Date=20260408T120000Z&X-Amz-Expires=3600&X-Amz-Signature=98db511ac493c172056de0b26a6b104121523d2671456e8427f40b3b83938566&X-Amz-SignedHeaders=host"
    );
    for (region, host) in [
        ("cn-northwest-1", "s3.cn-northwest-1.amazonaws.com.cn"),
        ("us-gov-west-1", "s3.us-gov-west-1.amazonaws.com"),
        ("us-iso-east-1", "s3.us-iso-east-1.c2s.ic.gov"),
        ("us-isob-east-1", "s3.us-isob-east-1.sc2s.sgov.gov"),
        ("eu-isoe-west-1", "s3.eu-isoe-west-1.cloud.adc-e.uk"),
        ("us-isof-south-1", "s3.us-isof-south-1.csp.hci.ic.gov"),
        ("eusc-de-east-1", "s3.eusc-de-east-1.amazonaws.eu"),
        ("il-central-1", "s3.il-central-1.amazonaws.com"),
    ] {
        assert_eq!(
            base("my.bucket", region),
            format!("https://{host}/my.bucket/path/to/snapshot.db")
        );
    }
}

#[test]
fn a_region_that_is_not_a_dns_name_is_refused() {
    // botocore's rule: one DNS label (a dot would put another host into the URL).
    for region in [
        "us-east-1/evil",
        "evil.com#",
        "eu west 1",
        "-us-east-1",
        "us-east-1.evil.com",
    ] {
        let e = presign(&request("my-bucket", region), "").unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "invalid region {region:?}: one DNS label of up to 63 letters, digits and hyphens, \
                 not only digits, neither starting nor ending with a hyphen (such as us-east-1)"
            )
        );
    }
}
