//! The admin API's URLs (below `/miniplane/v1/`), parsed for the request parser
//! ([`crate::request::Route::Admin`]) without it importing the admin API's handlers.

/// What an admin URL addresses (below `/miniplane/v1/`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AdminRoute {
    /// `faults[/{name}]`
    Faults(Option<String>),
    /// `controllers`
    Controllers,
    /// `controllers/{name}/{pause|resume|step}`
    ControllerAction(String, String),
    /// `components/{component}/controllers`
    ComponentControllers(String),
    /// `lab`
    Lab,
    /// `history/{the object's API path}` (e.g. `history/api/v1/namespaces/default/pods/web`)
    History(String),
    /// `snapshot`
    Snapshot,
    /// `clock`
    Clock,
}

impl AdminRoute {
    /// Parses the segments after `miniplane/v1`.
    pub fn parse(rest: &[&str]) -> Option<AdminRoute> {
        Some(match rest {
            ["faults"] => AdminRoute::Faults(None),
            ["faults", name] => AdminRoute::Faults(Some((*name).to_string())),
            ["controllers"] => AdminRoute::Controllers,
            ["controllers", name, action] => {
                AdminRoute::ControllerAction((*name).to_string(), (*action).to_string())
            }
            ["components", c, "controllers"] => AdminRoute::ComponentControllers((*c).to_string()),
            ["lab"] => AdminRoute::Lab,
            ["history", path @ ..] if !path.is_empty() => AdminRoute::History(path.join("/")),
            ["snapshot"] => AdminRoute::Snapshot,
            ["clock"] => AdminRoute::Clock,
            _ => return None,
        })
    }
}
