//! The type of a core/v1 Event (`v1.EventTypeNormal` / `v1.EventTypeWarning`), which
//! controllers pass to the event recorder.
//!
//! Not to be confused with a watch event's type (`ADDED`/`MODIFIED`/`DELETED`), which the API
//! server's watch cache keeps.

/// `Event.type`: Normal or Warning.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventType {
    /// Something expected happened (`Normal`).
    Normal,
    /// Something failed or looks wrong (`Warning`).
    Warning,
}

impl EventType {
    /// The string Kubernetes puts in `Event.type`.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_strings() {
        assert_eq!(EventType::Normal.as_str(), "Normal");
        assert_eq!(EventType::Warning.as_str(), "Warning");
    }
}
