//! The container backends' settings (the `"container"` section, `--image`): what runs,
//! and who the program is there (`ContainerUser`) — parsed, resolved over the layers, found
//! in the container's own files, and described for `explain`.

use serde::Serialize;
use std::path::PathBuf;

use super::config::ContainerConfig;

/// A container backend's settings (the `"container"` section; `--image`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ContainerSettings {
    /// The image; `None`: the host's own files.
    pub image: Option<String>,
    /// The engine's client, when not the one on `PATH`.
    pub engine: Option<PathBuf>,
    /// The image's files read-only (always, without an image).
    pub read_only_root: bool,
    /// More `run` options, vetted (`sandbox::container::vet_run_args`).
    pub run_args: Vec<String>,
    /// Who the program is inside the container; `None`: the user who ran sbx-shell.
    pub user: Option<ContainerUser>,
}

/// Who the program is inside a container (`"user"` of the `"container"` section): the ids
/// it sees as its own, in a user namespace of its own where they stand for the user who ran
/// sbx-shell — what it makes is still that user's, and it can do nothing that user cannot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContainerUser {
    pub user: IdOrName,
    /// The group; `None`: the user's own in the container's `/etc/passwd` (0 without one).
    pub group: Option<IdOrName>,
}

/// A user or group as a number, or as a name the container's own `/etc/passwd` or
/// `/etc/group` gives the number of.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IdOrName {
    Id(u32),
    Name(String),
}

impl ContainerUser {
    /// `USER` or `USER:GROUP`, each a number or a name (letters, digits, `_`, `.`, `-`; not
    /// beginning with `-`; at most 32 characters), as `docker run --user` takes them.
    pub fn parse(text: &str) -> Option<ContainerUser> {
        let (user, group) = match text.split_once(':') {
            Some((user, group)) => (user, Some(group)),
            None => (text, None),
        };
        let group = match group {
            Some(group) => Some(IdOrName::parse(group)?),
            None => None,
        };
        Some(ContainerUser {
            user: IdOrName::parse(user)?,
            group,
        })
    }
}

impl IdOrName {
    fn parse(text: &str) -> Option<IdOrName> {
        if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
            return text.parse().ok().map(IdOrName::Id);
        }
        let fits = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-');
        let named = !text.is_empty()
            && text.len() <= 32
            && !text.starts_with('-')
            && text.bytes().all(fits);
        named.then(|| IdOrName::Name(text.to_string()))
    }
}

impl std::fmt::Display for IdOrName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            IdOrName::Id(id) => write!(f, "{id}"),
            IdOrName::Name(name) => f.write_str(name),
        }
    }
}

impl std::fmt::Display for ContainerUser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.group {
            Some(group) => write!(f, "{}:{group}", self.user),
            None => write!(f, "{}", self.user),
        }
    }
}

impl ContainerSettings {
    /// The `"container"` section: what runs, who the program is there.
    pub fn describe(&self) -> String {
        let c = self;
        let image = match &c.image {
            Some(image) => format!("image {image}"),
            None => "the host's own files (read-only)".to_string(),
        };
        let root = match (&c.image, c.read_only_root) {
            (Some(_), true) => "; the image's files read-only",
            _ => "",
        };
        let user = match &c.user {
            Some(user) => {
                format!("; the program is {user} there, in a user namespace where that user is you")
            }
            None => "; the program runs as you".to_string(),
        };
        let engine = c
            .engine
            .as_ref()
            .map_or(String::new(), |e| format!("; client {}", e.display()));
        let extra = match c.run_args.is_empty() {
            true => String::new(),
            false => format!("; run options {}", c.run_args.join(" ")),
        };
        format!("{image}{root}{user}{engine}{extra}")
    }
}

/// The `"container"` sections of the layers (`(origin, section)`, in order): each setting
/// the last layer's that has it; `run_args` every layer's, in order. A bad `user` is
/// returned as its layer's origin and itself.
pub fn resolve(
    layers: &[(&str, Option<&ContainerConfig>)],
) -> Result<ContainerSettings, (String, String)> {
    let sections = || layers.iter().rev().filter_map(|(_, c)| *c);
    let user = match layers
        .iter()
        .rev()
        .find_map(|(o, c)| Some((o, (*c)?.user.as_ref()?)))
    {
        Some((origin, user)) => {
            Some(ContainerUser::parse(user).ok_or_else(|| (origin.to_string(), user.clone()))?)
        }
        None => None,
    };
    Ok(ContainerSettings {
        user,
        image: sections().find_map(|c| c.image.clone()),
        engine: sections().find_map(|c| c.engine.clone()),
        read_only_root: sections().find_map(|c| c.read_only_root).unwrap_or(false),
        run_args: layers
            .iter()
            .filter_map(|(_, c)| *c)
            .flat_map(|c| c.run_args.iter().cloned())
            .collect(),
    })
}

/// The ids `user` stands for in the container (`ContainerSettings::user`), from the text of
/// its `/etc/passwd` and `/etc/group` (empty when it has none): a number as it is, a name
/// by its line; without a group, the user's own (0 for a number without a line, as the
/// engines do).
pub fn ids_of(user: &ContainerUser, passwd: &str, group: &str) -> Result<(u32, u32), String> {
    // `name:password:uid:gid:…` and `name:password:gid:…`.
    let entries = |text: &'_ str| -> Vec<Vec<String>> {
        text.lines()
            .map(|line| line.split(':').map(str::to_string).collect::<Vec<_>>())
            .filter(|fields| fields.len() >= 3)
            .collect()
    };
    let (users, groups) = (entries(passwd), entries(group));
    let number = |fields: &[String], at: usize| fields.get(at).and_then(|f| f.parse::<u32>().ok());
    let (uid, own_gid) = match &user.user {
        IdOrName::Id(uid) => {
            let line = users.iter().find(|f| number(f, 2) == Some(*uid));
            (*uid, line.and_then(|f| number(f, 3)).unwrap_or(0))
        }
        IdOrName::Name(name) => users
            .iter()
            .find(|f| f[0] == *name)
            .and_then(|f| Some((number(f, 2)?, number(f, 3)?)))
            .ok_or_else(|| not_there(user, "user", "/etc/passwd"))?,
    };
    let gid = match &user.group {
        None => own_gid,
        Some(IdOrName::Id(gid)) => *gid,
        Some(IdOrName::Name(name)) => groups
            .iter()
            .find(|f| f[0] == *name)
            .and_then(|f| number(f, 2))
            .ok_or_else(|| not_there(user, "group", "/etc/group"))?,
    };
    Ok((uid, gid))
}

fn not_there(user: &ContainerUser, what: &str, file: &str) -> String {
    crate::sys::say::hinted(
        format_args!("container user {user}: no such {what} in the container's {file}"),
        "name one the image has, or give its number (\"user\": \"1000:1000\")",
    )
}

#[cfg(test)]
mod tests {
    use super::{ids_of, ContainerUser, IdOrName};

    #[test]
    fn a_container_user_is_a_user_and_maybe_a_group_each_a_number_or_a_name() {
        let name = |n: &str| IdOrName::Name(n.into());
        let parsed = |text: &str| ContainerUser::parse(text).map(|u| (u.user, u.group));
        assert_eq!(parsed("root"), Some((name("root"), None)));
        assert_eq!(parsed("1000"), Some((IdOrName::Id(1000), None)));
        assert_eq!(
            parsed("node:staff"),
            Some((name("node"), Some(name("staff"))))
        );
        assert_eq!(
            parsed("0:27"),
            Some((IdOrName::Id(0), Some(IdOrName::Id(27))))
        );
        assert_eq!(parsed("build-bot.1"), Some((name("build-bot.1"), None)));
        for bad in [
            "",
            ":",
            "a:",
            ":b",
            "a:b:c",
            "a b",
            "-x",
            "99999999999",
            "ro\not",
            &"x".repeat(33),
        ] {
            assert_eq!(ContainerUser::parse(bad), None, "{bad:?}");
        }
        assert_eq!(
            ContainerUser::parse("node:7").unwrap().to_string(),
            "node:7"
        );
    }

    #[test]
    fn a_container_user_stands_for_the_ids_the_containers_own_files_give_it() {
        let passwd =
            "root:x:0:0:root:/root:/bin/bash\nnode:x:1000:1001::/home/node:/bin/sh\nbad:x:y:z\n";
        let group = "root:x:0:\nnode:x:1001:\nstaff:x:50:node\n";
        let ids = |text: &str| ids_of(&ContainerUser::parse(text).unwrap(), passwd, group);
        assert_eq!(ids("root"), Ok((0, 0)));
        assert_eq!(ids("node"), Ok((1000, 1001)));
        assert_eq!(ids("node:staff"), Ok((1000, 50)));
        assert_eq!(ids("node:7"), Ok((1000, 7)));
        // A number: its line's group, else 0 (as the engines do).
        assert_eq!(ids("1000"), Ok((1000, 1001)));
        assert_eq!(ids("4242"), Ok((4242, 0)));
        assert_eq!(ids("4242:4242"), Ok((4242, 4242)));
        for (missing, file) in [
            ("nosuch", "/etc/passwd"),
            ("bad", "/etc/passwd"),
            ("node:nogroup", "/etc/group"),
        ] {
            let e = ids(missing).unwrap_err();
            assert!(e.contains(file) && e.contains("Hint:"), "{missing}: {e}");
        }
        // No /etc/passwd at all: numbers still work, names do not.
        let none = |text: &str| ids_of(&ContainerUser::parse(text).unwrap(), "", "");
        assert_eq!(none("1000:1000"), Ok((1000, 1000)));
        assert!(none("root").is_err());
    }
}
