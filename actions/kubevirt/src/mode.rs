//! The module setting `mode`: `upstream` reproduces kubevirt-velero-plugin exactly (its item sets,
//! quirks and error texts); `extended` (the default) fixes its bugs, follows what it misses and adds
//! guidance to its error messages.

/// How faithfully to follow upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// Same decisions, items and messages as kubevirt-velero-plugin.
    Upstream,
    /// Upstream's behaviour with its bugs fixed and its gaps followed.
    #[default]
    Extended,
}

impl Mode {
    /// Reads the setting's value; absent means [`Mode::Extended`].
    pub fn parse(setting: Option<&str>) -> Result<Mode, String> {
        match setting.map(str::trim) {
            None | Some("extended") => Ok(Mode::Extended),
            Some("upstream") => Ok(Mode::Upstream),
            Some(other) => Err(format!(
                "module setting mode = {other:?} is not valid: set it to \"upstream\" (reproduce kubevirt-velero-plugin) \
                 or \"extended\" (the default) in the [settings] table of the kubevirt module's manifest"
            )),
        }
    }

    /// Whether extended behaviour applies.
    pub fn extended(self) -> bool {
        self == Mode::Extended
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extended_is_the_default_and_bad_values_say_how_to_fix_them() {
        assert_eq!(Mode::parse(None), Ok(Mode::Extended));
        assert_eq!(Mode::parse(Some("upstream")), Ok(Mode::Upstream));
        assert_eq!(Mode::parse(Some("extended")), Ok(Mode::Extended));
        let e = Mode::parse(Some("Upstream")).unwrap_err();
        assert!(
            e.contains("\"Upstream\"") && e.contains("[settings]"),
            "{e}"
        );
    }
}
