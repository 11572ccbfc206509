//! What a person may do, and where: a role everywhere, a role on some teams,
//! or both ("viewer everywhere, operator on payments").
//!
//! A consumer belongs to the team the catalogue gives it. A role limited to
//! teams reaches only those teams' consumers; a consumer absent from the
//! catalogue belongs to no team, so only a role held everywhere reaches it.
//! Admin manages accounts, which belong to no team: it is never limited.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::{Catalogue, ConsumerName, Role, check_team};

/// A person's rights: the role they hold everywhere (if any) and the roles
/// they hold on named teams. Written `viewer operator@payments`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Rights {
    everywhere: Option<Role>,
    teams: BTreeMap<String, Role>,
}

/// The consumers a read may return or an action may touch.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Within {
    /// Every consumer, in the catalogue or not.
    #[default]
    Every,
    /// Only these (possibly none).
    Only(Vec<ConsumerName>),
}

impl Within {
    /// Whether `consumer` is among them.
    pub fn allows(&self, consumer: &str) -> bool {
        match self {
            Within::Every => true,
            Within::Only(names) => names.iter().any(|n| n.as_str() == consumer),
        }
    }

    pub fn is_every(&self) -> bool {
        matches!(self, Within::Every)
    }

    /// The consumers a read narrowed to `consumer` (when one is named)
    /// reaches: that one if it is among these, else none.
    pub fn narrowed_to(&self, consumer: Option<&ConsumerName>) -> Within {
        match consumer {
            None => self.clone(),
            Some(c) if self.allows(c.as_str()) => Within::Only(vec![c.clone()]),
            Some(_) => Within::Only(Vec::new()),
        }
    }

    /// Whether an objective over `scope` counts only consumers among these
    /// (a fleet-wide one counts every consumer; a team's, every one the
    /// catalogue gives the team).
    pub fn reads(&self, catalogue: &Catalogue, scope: &crate::slo::Scope) -> bool {
        use crate::slo::Scope;
        match (self, scope) {
            (Within::Every, _) => true,
            (Within::Only(_), Scope::Fleet) => false,
            (Within::Only(_), Scope::Team(team)) => {
                let mut of_team = catalogue
                    .entries()
                    .iter()
                    .filter(|e| &e.team == team)
                    .peekable();
                of_team.peek().is_some() && of_team.all(|e| self.allows(e.name.as_str()))
            }
            (Within::Only(_), Scope::Consumers { names, .. }) => {
                names.iter().all(|n| self.allows(n))
            }
            (Within::Only(_), Scope::Consumer { name, .. }) => self.allows(name),
        }
    }
}

/// Why a person may not read or act on a consumer, in words that name its
/// owner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OtherTeam {
    pub consumer: String,
    /// `None`: the catalogue names no team for it.
    pub team: Option<String>,
}

impl std::fmt::Display for OtherTeam {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.team {
            Some(team) => write!(
                f,
                "“{}” belongs to the team “{team}”, which your rights do not cover.",
                self.consumer
            ),
            None => write!(
                f,
                "“{}” belongs to no team in the consumer catalogue; only rights held on every \
                 team cover it.",
                self.consumer
            ),
        }
    }
}

impl Rights {
    /// `role` on every consumer: an account whose rights are not limited.
    pub fn everywhere(role: Role) -> Self {
        Self {
            everywhere: Some(role),
            teams: BTreeMap::new(),
        }
    }

    /// `role` on `teams` only.
    pub fn on_teams<'a>(
        role: Role,
        teams: impl IntoIterator<Item = &'a str>,
    ) -> Result<Self, String> {
        let mut rights = Self::default();
        for team in teams {
            rights.grant(role, Some(team))?;
        }
        if rights.teams.is_empty() {
            return Err("name at least one team".into());
        }
        Ok(rights)
    }

    /// Adds `role` on `team` (or everywhere); the higher role wins.
    pub fn grant(&mut self, role: Role, team: Option<&str>) -> Result<(), String> {
        match team {
            None => self.everywhere = self.everywhere.max(Some(role)),
            Some(_) if role == Role::Admin => {
                return Err(
                    "admin cannot be limited to a team: it manages accounts, which belong to no team"
                        .into(),
                );
            }
            Some(team) => {
                check_team(team)?;
                let held = self.teams.entry(team.to_owned()).or_insert(role);
                *held = (*held).max(role);
            }
        }
        // A team's role no higher than the role everywhere adds nothing.
        if let Some(everywhere) = self.everywhere {
            self.teams.retain(|_, role| *role > everywhere);
        }
        Ok(())
    }

    /// The rights of several grants together (a person in several groups).
    pub fn merge(&mut self, other: &Rights) {
        if let Some(role) = other.everywhere {
            let _ = self.grant(role, None);
        }
        for (team, role) in &other.teams {
            let _ = self.grant(*role, Some(team));
        }
    }

    /// What both rights hold: on each consumer the lower of the two roles
    /// (a token acts with no more than its owner holds now). `None` when
    /// they share no role anywhere.
    pub fn meet(&self, other: &Rights) -> Option<Rights> {
        let mut met = Rights {
            everywhere: self.everywhere.min(other.everywhere),
            teams: BTreeMap::new(),
        };
        for team in self.teams.keys().chain(other.teams.keys()) {
            let (mine, theirs) = (self.role_on(Some(team)), other.role_on(Some(team)));
            if let Some(role) = mine.min(theirs) {
                let _ = met.grant(role, Some(team));
            }
        }
        met.highest().is_some().then_some(met)
    }

    /// The highest role held anywhere (what the pages' prefixes need).
    pub fn highest(&self) -> Option<Role> {
        self.teams.values().copied().max().max(self.everywhere)
    }

    /// Whether some role is held on named teams only.
    pub fn is_limited(&self) -> bool {
        !self.teams.is_empty()
    }

    /// The role held on a consumer of `team` (`None`: a consumer of no team).
    pub fn role_on(&self, team: Option<&str>) -> Option<Role> {
        let on_team = team.and_then(|t| self.teams.get(t)).copied();
        on_team.max(self.everywhere)
    }

    /// The teams some role is limited to, in order.
    pub fn teams(&self) -> impl Iterator<Item = (&str, Role)> {
        self.teams.iter().map(|(t, r)| (t.as_str(), *r))
    }

    /// Whether `needed` is held on `consumer` (its team from `catalogue`);
    /// else who owns it.
    pub fn check(
        &self,
        catalogue: &Catalogue,
        consumer: &str,
        needed: Role,
    ) -> Result<(), OtherTeam> {
        let team = catalogue.get(consumer).map(|e| e.team.as_str());
        match self.role_on(team) {
            Some(role) if role.includes(needed) => Ok(()),
            _ => Err(OtherTeam {
                consumer: consumer.to_owned(),
                team: team.map(str::to_owned),
            }),
        }
    }

    /// The consumers on which `needed` is held: every one when it is held
    /// everywhere, else the catalogue's consumers of those teams.
    pub fn within(&self, catalogue: &Catalogue, needed: Role) -> Within {
        if self.everywhere.is_some_and(|r| r.includes(needed)) {
            return Within::Every;
        }
        Within::Only(
            catalogue
                .entries()
                .iter()
                .filter(|e| self.teams.get(&e.team).is_some_and(|r| r.includes(needed)))
                .map(|e| e.name.clone())
                .collect(),
        )
    }
}

impl Rights {
    /// Whether the person may read an objective over `scope`: every
    /// consumer it counts must be theirs to read (a fleet-wide objective
    /// counts every team's).
    pub fn reads_scope(&self, catalogue: &Catalogue, scope: &crate::slo::Scope) -> bool {
        use crate::slo::Scope;
        let within = self.within(catalogue, Role::Viewer);
        match scope {
            Scope::Fleet => within.is_every(),
            Scope::Team(team) => self.role_on(Some(team)).is_some(),
            Scope::Consumers { names, .. } => names.iter().all(|n| within.allows(n)),
            Scope::Consumer { name, .. } => within.allows(name),
        }
    }
}

impl std::fmt::Display for Rights {
    /// `viewer operator@payments operator@growth`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut parts: Vec<String> = self.everywhere.iter().map(|r| r.to_string()).collect();
        parts.extend(self.teams.iter().map(|(t, r)| format!("{r}@{t}")));
        f.write_str(&parts.join(" "))
    }
}

impl std::str::FromStr for Rights {
    type Err = String;

    /// `role` or `role@team`, separated by spaces or commas.
    fn from_str(text: &str) -> Result<Self, String> {
        let mut rights = Self::default();
        for grant in text.split([' ', ',']).filter(|g| !g.is_empty()) {
            let (role, team) = match grant.split_once('@') {
                Some((role, team)) => (role, Some(team)),
                None => (grant, None),
            };
            let role: Role = role
                .parse()
                .map_err(|e: crate::UnknownValue| format!("{grant:?}: {e}"))?;
            rights
                .grant(role, team)
                .map_err(|e| format!("{grant:?}: {e}"))?;
        }
        if rights.highest().is_none() {
            return Err("no role given".into());
        }
        Ok(rights)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn what_two_rights_both_hold_is_the_lower_role_on_each_team() {
        let rights = |text: &str| text.parse::<Rights>().unwrap();
        let token = rights("operator");
        assert_eq!(
            token.meet(&rights("viewer operator@payments")),
            Some(rights("viewer operator@payments"))
        );
        assert_eq!(
            rights("operator@payments").meet(&rights("admin")),
            Some(rights("operator@payments"))
        );
        assert_eq!(
            rights("operator@payments").meet(&rights("operator@growth")),
            None
        );
        assert_eq!(
            rights("viewer operator@payments").meet(&rights("viewer@payments operator@growth")),
            Some(rights("viewer@growth viewer@payments")),
            "the lower role on each team either names"
        );
        assert_eq!(
            rights("admin").meet(&rights("admin")),
            Some(rights("admin"))
        );
    }

    use super::*;
    use crate::catalogue::tests::entry;

    fn catalogue() -> Catalogue {
        Catalogue::new(
            vec![
                entry("payment-webhooks", "payments"),
                entry("invoices", "payments"),
                entry("reminders", "growth"),
            ],
            "test",
        )
    }

    #[test]
    fn an_operator_of_payments_acts_on_payments_only_and_reads_nothing_else() {
        let rights: Rights = "operator@payments".parse().unwrap();
        let c = catalogue();
        assert!(rights.is_limited());
        assert_eq!(rights.highest(), Some(Role::Operator));
        assert_eq!(rights.check(&c, "invoices", Role::Operator), Ok(()));
        let refused = rights.check(&c, "reminders", Role::Viewer).unwrap_err();
        assert_eq!(refused.team.as_deref(), Some("growth"));
        assert!(refused.to_string().contains("“growth”"));
        let stranger = rights
            .check(&c, "not-catalogued", Role::Viewer)
            .unwrap_err();
        assert_eq!(stranger.team, None);
        let within = rights.within(&c, Role::Viewer);
        assert!(within.allows("invoices") && within.allows("payment-webhooks"));
        assert!(!within.allows("reminders") && !within.allows("not-catalogued"));
    }

    #[test]
    fn a_viewer_everywhere_who_operates_payments_reads_all_and_acts_on_payments() {
        let rights: Rights = "viewer, operator@payments".parse().unwrap();
        let c = catalogue();
        assert_eq!(rights.within(&c, Role::Viewer), Within::Every);
        assert!(rights.check(&c, "reminders", Role::Viewer).is_ok());
        assert!(rights.check(&c, "reminders", Role::Operator).is_err());
        assert!(rights.check(&c, "invoices", Role::Operator).is_ok());
        let acts = rights.within(&c, Role::Operator);
        assert!(acts.allows("invoices") && !acts.allows("reminders"));
        assert_eq!(rights.to_string(), "viewer operator@payments");
    }

    #[test]
    fn a_team_s_operator_reads_its_objectives_and_no_fleet_wide_one() {
        use crate::slo::Scope;
        let rights: Rights = "operator@payments".parse().unwrap();
        let c = catalogue();
        let consumer = |name: &str| Scope::Consumer {
            name: name.into(),
            team: None,
        };
        assert!(rights.reads_scope(&c, &Scope::Team("payments".into())));
        assert!(rights.reads_scope(&c, &consumer("invoices")));
        assert!(!rights.reads_scope(&c, &Scope::Fleet));
        assert!(!rights.reads_scope(&c, &Scope::Team("growth".into())));
        assert!(!rights.reads_scope(&c, &consumer("reminders")));
        let mixed = Scope::Consumers {
            names: vec!["invoices".into(), "reminders".into()],
            team: None,
        };
        assert!(!rights.reads_scope(&c, &mixed));
        assert!(Rights::everywhere(Role::Viewer).reads_scope(&c, &Scope::Fleet));
    }

    #[test]
    fn rights_everywhere_are_not_limited_and_read_back_as_their_role() {
        let rights: Rights = "operator".parse().unwrap();
        assert_eq!(rights, Rights::everywhere(Role::Operator));
        assert!(!rights.is_limited());
        assert_eq!(rights.to_string(), "operator");
        // A team's role below the role everywhere adds nothing.
        let same: Rights = "operator viewer@payments".parse().unwrap();
        assert_eq!(same, rights);
    }

    #[test]
    fn admin_is_never_limited_and_bad_grants_say_which() {
        assert!(
            "admin@payments"
                .parse::<Rights>()
                .unwrap_err()
                .contains("admin")
        );
        assert!(
            "boss@payments"
                .parse::<Rights>()
                .unwrap_err()
                .contains("boss")
        );
        assert!("operator@Pay Ments".parse::<Rights>().is_err());
        assert!("".parse::<Rights>().is_err());
        assert!(Rights::on_teams(Role::Operator, []).is_err());
    }

    #[test]
    fn several_groups_give_the_highest_role_on_each_team() {
        let mut rights: Rights = "viewer@growth".parse().unwrap();
        rights.merge(&"operator@payments".parse().unwrap());
        rights.merge(&"operator@growth".parse().unwrap());
        assert_eq!(rights.to_string(), "operator@growth operator@payments");
        rights.merge(&Rights::everywhere(Role::Admin));
        assert_eq!(rights, Rights::everywhere(Role::Admin));
    }
}
