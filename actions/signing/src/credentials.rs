//! Credential data from a BackupStorageLocation's Secret: the AWS shared-credentials format (profile
//! `default`) or a bare role ARN (docs/signing.md#s6-3), and the dotenv format of Azure (#s6-9).

use crate::error::Error;
use crate::s3::Keys;

/// What AWS credential data says to use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AwsSource {
    /// Static keys.
    Keys(Keys),
    /// A role to assume with a web-identity token from a file; `None` is the file named by the
    /// environment variable `AWS_WEB_IDENTITY_TOKEN_FILE`.
    WebIdentity {
        /// The role ARN.
        role_arn: String,
        /// `web_identity_token_file` of the profile, if it has one.
        token_file: Option<String>,
    },
}

/// Parses AWS credential data with profile `default` (docs/signing.md#s6-3).
pub fn parse_aws(data: &str) -> Result<AwsSource, Error> {
    let data = data.trim();
    if data.is_empty() {
        return Err(Error::Invalid("empty credential data".into()));
    }
    if data.starts_with("arn:")
        && data.contains(":iam:")
        && data.contains(":role/")
        && !data.contains('\n')
    {
        return Ok(AwsSource::WebIdentity {
            role_arn: data.to_string(),
            token_file: None,
        });
    }
    let profile = ini_profile(data, "default");
    let get = |key: &str| {
        profile
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
            .unwrap_or_default()
    };
    let role_arn = get("role_arn");
    if !role_arn.is_empty() {
        let file = get("web_identity_token_file");
        return Ok(AwsSource::WebIdentity {
            role_arn,
            token_file: (!file.is_empty()).then_some(file),
        });
    }
    let missing = |key: &str| {
        Error::Invalid(format!(
            "unable to parse credential data as static or STS credentials: {key} not found for profile \"default\""
        ))
    };
    let access_key_id = get("aws_access_key_id");
    if access_key_id.is_empty() {
        return Err(missing("aws_access_key_id"));
    }
    let secret_access_key = get("aws_secret_access_key");
    if secret_access_key.is_empty() {
        return Err(missing("aws_secret_access_key"));
    }
    Ok(AwsSource::Keys(Keys {
        access_key_id,
        secret_access_key,
        session_token: get("aws_session_token"),
    }))
}

/// The `k = v` lines of one INI profile, in order. A `[section]` line switches the profile by exact
/// comparison; `#` and `;` lines are comments; inline comments are kept.
fn ini_profile(data: &str, name: &str) -> Vec<(String, String)> {
    let header = format!("[{name}]");
    let mut inside = false;
    let mut pairs = Vec::new();
    for line in data.split('\n').map(str::trim) {
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if line.starts_with('[') {
            inside = line == header;
            continue;
        }
        if let (true, Some((k, v))) = (inside, line.split_once('=')) {
            pairs.push((k.trim().to_string(), v.trim().to_string()));
        }
    }
    pairs
}

/// Parses dotenv data (docs/signing.md#s6-9): `KEY=value` lines, trimmed, `#` comments, later keys win, quotes kept.
pub fn parse_dotenv(data: &str) -> Vec<(String, String)> {
    let mut pairs: Vec<(String, String)> = Vec::new();
    for line in data.split('\n').map(str::trim) {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if let Some((k, v)) = line.split_once('=') {
            let (k, v) = (k.trim().to_string(), v.trim().to_string());
            pairs.retain(|(existing, _)| *existing != k);
            pairs.push((k, v));
        }
    }
    pairs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(id: &str, secret: &str, token: &str) -> AwsSource {
        AwsSource::Keys(Keys {
            access_key_id: id.into(),
            secret_access_key: secret.into(),
            session_token: token.into(),
        })
    }

    #[test]
    fn static_keys_from_the_default_profile() {
        let data = "# comment\n[other]\naws_access_key_id=OTHER\n\n[default]\n; note\naws_access_key_id = AKID \naws_secret_access_key=se=cret\naws_access_key_id=LATER\n[default2]\naws_session_token=nope\n";
        assert_eq!(parse_aws(data).unwrap(), keys("LATER", "se=cret", ""));
        let with_token = "[default]\naws_access_key_id=A\naws_secret_access_key=S\naws_session_token=T # inline\n";
        assert_eq!(parse_aws(with_token).unwrap(), keys("A", "S", "T # inline"));
    }

    #[test]
    fn role_arns_mean_web_identity() {
        for arn in [
            "arn:aws:iam::123456789012:role/velero",
            "arn:aws-us-gov:iam::1:role/x",
            "arn:aws-cn:iam::1:role/y",
        ] {
            assert_eq!(
                parse_aws(&format!("  {arn}\n")).unwrap(),
                AwsSource::WebIdentity {
                    role_arn: arn.into(),
                    token_file: None
                }
            );
        }
        let ini = "[default]\nrole_arn = arn:aws:iam::1:role/r\nweb_identity_token_file = /var/run/token\n";
        assert_eq!(
            parse_aws(ini).unwrap(),
            AwsSource::WebIdentity {
                role_arn: "arn:aws:iam::1:role/r".into(),
                token_file: Some("/var/run/token".into())
            }
        );
        let no_file = "[default]\nrole_arn=arn:aws:iam::1:role/r\n";
        assert_eq!(
            parse_aws(no_file).unwrap(),
            AwsSource::WebIdentity {
                role_arn: "arn:aws:iam::1:role/r".into(),
                token_file: None
            }
        );
    }

    #[test]
    fn bad_data_is_refused_with_the_spec_texts() {
        assert_eq!(
            parse_aws(" \n").unwrap_err().to_string(),
            "empty credential data"
        );
        let e = parse_aws("this is not valid ini or arn data")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("aws_access_key_id not found for profile \"default\""),
            "{e}"
        );
        let e = parse_aws("[default]\naws_access_key_id=A\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("aws_secret_access_key not found"), "{e}");
        let e = parse_aws("[prod]\naws_access_key_id=A\naws_secret_access_key=S\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("aws_access_key_id not found"), "{e}");
    }

    #[test]
    fn dotenv_follows_the_spec() {
        let pairs =
            parse_dotenv("# c\nKEY = spacedvalue\nB=abc=def==\nQ=\"quoted\"\nKEY=later\n\n");
        assert_eq!(
            pairs,
            vec![
                ("B".into(), "abc=def==".into()),
                ("Q".into(), "\"quoted\"".into()),
                ("KEY".into(), "later".into())
            ]
        );
    }
}
