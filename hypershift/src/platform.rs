//! Platform validation (docs/hcp.md#s3-6): the HostedControlPlane platforms the plugin supports.

/// The accepted `spec.platform.type` values.
pub const SUPPORTED: [&str; 7] = [
    "AWS",
    "Azure",
    "IBMCloud",
    "KubeVirt",
    "OpenStack",
    "Agent",
    "None",
];

/// Accepts a supported platform; anything else (`PowerVS`, `GCP`, "") is `unsupported platform type <t>`.
pub fn validate(platform: &str) -> Result<(), String> {
    if SUPPORTED.contains(&platform) {
        Ok(())
    } else {
        Err(format!("unsupported platform type {platform}"))
    }
}

/// `spec.platform.type` of a HostedControlPlane (or HostedCluster); "" when absent.
pub fn of(object: &velero_wasm_sdk::Object) -> &str {
    object.str_at("/spec/platform/type").unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn supported_and_unsupported_platforms() {
        for p in SUPPORTED {
            assert_eq!(validate(p), Ok(()));
        }
        for p in ["PowerVS", "GCP", "", "aws", "UnsupportedPlatform"] {
            assert_eq!(
                validate(p),
                Err(format!("unsupported platform type {p}")),
                "{p}"
            );
        }
    }
}
