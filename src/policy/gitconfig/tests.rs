use super::*;

fn keys(text: &str) -> Vec<(String, Option<String>)> {
    parse(text.as_bytes())
        .unwrap()
        .into_iter()
        .map(|e| {
            (
                String::from_utf8(e.key).unwrap(),
                e.value.map(|v| String::from_utf8(v).unwrap()),
            )
        })
        .collect()
}

fn kv(k: &str, v: &str) -> (String, Option<String>) {
    (k.to_string(), Some(v.to_string()))
}

#[test]
fn the_grammar_is_gits() {
    // A key on its section's header line; sections and names lower-cased, subsections kept.
    assert_eq!(
        keys("[Core] FSMonitor = \"/x.sh\"\n"),
        [kv("core.fsmonitor", "/x.sh")]
    );
    assert_eq!(
        keys("[remote \"Or\\\"ig\"]\n\turl = u\n"),
        [kv("remote.Or\"ig.url", "u")]
    );
    // The old spelling lower-cases the subsection too.
    assert_eq!(keys("[Pager.Status]x=1"), [kv("pager.status.x", "1")]);
    // Continuations, escapes, quotes, comments, trimming, \r\n, a key without a value.
    assert_eq!(
        keys("[a]\r\n b = one \\\n two ; c\n c = \"x ; y\"  # z\n d\n e = \\t\\\"\\\\\n"),
        [
            kv("a.b", "one  two"),
            kv("a.c", "x ; y"),
            ("a.d".to_string(), None),
            kv("a.e", "\t\"\\"),
        ]
    );
    assert_eq!(keys("\u{feff}[a]b=c"), [kv("a.b", "c")]);
    // What git refuses to read.
    for bad in [
        "[a]\nb = \\q\n",
        "[a]\nb = \"open\n",
        "[]\nb=c\n",
        "[a \"x\" ]\n",
        "[a\nb=c",
        "[a]\n1b = c\n",
        "[a]\nb c\n",
        "[a \"x\n\"]\n",
    ] {
        assert!(parse(bad.as_bytes()).is_err(), "{bad:?}");
    }
}

#[test]
fn only_the_keys_ordinary_git_writes_are_allowed() {
    let init = "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\tlogallrefupdates = true\n";
    let clone = "[remote \"origin\"]\n\turl = https://example.com/r.git\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n[branch \"main\"]\n\tremote = origin\n\tmerge = refs/heads/main\n";
    let ident = "[user]\n\tname = A\n\temail = a@example.com\n[submodule \"lib\"]\n\turl = ../lib\n\tactive = true\n";
    for ok in [
        init,
        clone,
        ident,
        "[remote \"o\"]\n\turl = git@github.com:a/b.git\n",
    ] {
        assert_eq!(refused(ok.as_bytes(), &[]), Vec::<String>::new(), "{ok}");
    }
    let attacks = [
        ("[core] fsmonitor = \"touch /tmp/x\"\n", "core.fsmonitor"),
        ("[pager]\n\tstatus = touch /x\n", "pager.status"),
        (
            "[remote \"o\"]\n\tuploadpack = touch /x\n",
            "remote.o.uploadpack",
        ),
        (
            "[protocol \"ext\"]\n\tallow = always\n",
            "protocol.ext.allow",
        ),
        (
            "[gpg \"ssh\"]\n\tdefaultKeyCommand = x\n",
            "gpg.ssh.defaultkeycommand",
        ),
        ("[core]\n\tgitProxy = x\n", "core.gitproxy"),
        (
            "[interactive]\n\tdiffFilter = x\n",
            "interactive.difffilter",
        ),
        ("[difftool \"x\"]\n\tcmd = x\n", "difftool.x.cmd"),
        ("[filter \"lfs\"]\n\tclean = x\n", "filter.lfs.clean"),
        ("[diff \"x\"]\n\ttextconv = x\n", "diff.x.textconv"),
        ("[credential]\n\thelper = x\n", "credential.helper"),
        ("[core]\n\tsshCommand = x\n", "core.sshcommand"),
        (
            "[core]\n\talternateRefsCommand = x\n",
            "core.alternaterefscommand",
        ),
        ("[include]\n\tpath = ../x\n", "include.path"),
        (
            "[includeIf \"gitdir:/\"]\n\tpath = ../x\n",
            "includeif.gitdir:/.path",
        ),
        ("[alias]\n\tst = !touch /x\n", "alias.st"),
        ("[core]\n\thooksPath = /x\n", "core.hookspath"),
        (
            "[submodule \"x\"]\n\tupdate = !touch /x\n",
            "submodule.x.update",
        ),
    ];
    for (text, key) in attacks {
        assert_eq!(refused(text.as_bytes(), &[]), [key.to_string()], "{text}");
    }
    // URLs that run something.
    for url in [
        "ext::sh -c touch% /x",
        "fd::3",
        "foo::bar",
        "-uevil",
        "ssh://-oProxyCommand=x/y",
        "x --upload-pack=evil",
    ] {
        let text = format!("[remote \"o\"]\n\turl = \"{url}\"\n");
        let got = refused(text.as_bytes(), &[]);
        assert_eq!(got, ["remote.o.url (a URL that runs a command)"], "{url}");
    }
    for url in [
        "https://h/r",
        "ssh://git@h:22/r",
        "[::1]:r",
        "../r",
        "file:///r",
    ] {
        assert!(!url_runs(url.as_bytes()), "{url}");
    }
    // A config git cannot read is refused whole.
    assert_eq!(refused(b"[core\n", &[]).len(), 1);
    // The user's allowances.
    let lfs = "[filter \"lfs\"]\n\tclean = git-lfs clean -- %f\n\trequired = true\n";
    assert_eq!(
        refused(lfs.as_bytes(), &["filter.lfs.*".into()]),
        Vec::<String>::new()
    );
    assert_eq!(
        refused(lfs.as_bytes(), &["filter.*.clean".into()]),
        ["filter.lfs.required"]
    );
    assert!(matches("Core.Pager", b"core.pager"));
    assert!(!matches("remote.*.url", b"remote.url"));
    assert!(
        !matches("remote.O.url", b"remote.o.url"),
        "subsections keep case"
    );
    assert!(valid_pattern("core.pager") && valid_pattern("filter.*.*"));
    assert!(!valid_pattern("pager") && !valid_pattern("*.x") && !valid_pattern("a b.c"));
}

/// A small deterministic generator (xorshift64*), so a failure names its seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn pick<'a>(&mut self, from: &[&'a str]) -> &'a str {
        from[(self.next() % from.len() as u64) as usize]
    }
}

fn generated(rng: &mut Rng) -> Vec<u8> {
    const HEADERS: &[&str] = &[
        "[core]",
        "[Core]",
        "[remote \"origin\"]",
        "[remote \"O\\\"r\\\\g\"]",
        "[a.B]",
        "[ core ]",
        "[x \"s\" ]",
        "[x  \"s p\"]",
        "[]",
        "[\"x\"]",
        "[a-b]",
        "[a_b]",
        "[gpg \"ssh\"]",
        "[x\t\"y\"]",
    ];
    const KEYS: &[&str] = &["fsmonitor", "URL", "a-b", "1x", "key", "k_", "Pager", "x9"];
    const SEPS: &[&str] = &[" = ", "=", "\t=\t", " ", "", "  =", "= "];
    const VALUES: &[&str] = &[
        "plain",
        "\"quoted value\"",
        "a\\\nb",
        "x # comment",
        "x;y",
        "\"x;y\"",
        "\\t",
        "\\q",
        "trailing   ",
        "  lead",
        "\"open",
        "a\\\"b",
        "é",
        "\"a\"b\"c\"",
        "\\",
        "\"\\\n\"",
        "a \"b\" c",
        "\\b\\n",
        "",
        "#",
        " ; ",
        "\t\"\t\"\t",
    ];
    const ENDS: &[&str] = &["\n", "\r\n", "\n", "\r", "\n\n", " \n", "\t\n"];
    const COMMENTS: &[&str] = &["# c", "; c", "#", "  ; [x]"];
    let mut out = Vec::new();
    if rng.next() % 16 == 0 {
        out.extend_from_slice("\u{feff}".as_bytes());
    }
    for _ in 0..(1 + rng.next() % 6) {
        let line = match rng.next() % 8 {
            0 => rng.pick(HEADERS).to_string(),
            1 => rng.pick(COMMENTS).to_string(),
            2 => format!("{} {}", rng.pick(HEADERS), rng.pick(KEYS)),
            _ => format!(
                "{}{}{}{}",
                if rng.next() % 3 == 0 { "\t" } else { "" },
                rng.pick(KEYS),
                rng.pick(SEPS),
                rng.pick(VALUES)
            ),
        };
        out.extend_from_slice(line.as_bytes());
        out.extend_from_slice(rng.pick(ENDS).as_bytes());
    }
    // Mutations: a byte replaced, inserted or removed.
    const BYTES: &[u8] = b"[]\"\\=;# \t\n\r.-aZ0\x00\xff";
    for _ in 0..(rng.next() % 6).saturating_sub(3) {
        if out.is_empty() {
            break;
        }
        let at = (rng.next() % out.len() as u64) as usize;
        let byte = BYTES[(rng.next() % BYTES.len() as u64) as usize];
        match rng.next() % 3 {
            0 => out[at] = byte,
            1 => out.insert(at, byte),
            _ => {
                out.remove(at);
            }
        }
    }
    out
}

/// git's own reading of a config file (`git config --list -z`): its entries, or `None`
/// when git refuses it.
fn git_reads(file: &std::path::Path) -> Option<Vec<ConfigEntry>> {
    let out = std::process::Command::new("git")
        .args(["config", "--file"])
        .arg(file)
        .args(["--no-includes", "--list", "-z"])
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .stderr(std::process::Stdio::null())
        .output()
        .unwrap();
    if !out.status.success() {
        return None;
    }
    let mut entries = Vec::new();
    for item in out.stdout.split(|b| *b == 0).filter(|i| !i.is_empty()) {
        entries.push(match item.iter().position(|b| *b == b'\n') {
            Some(at) => ConfigEntry {
                key: item[..at].to_vec(),
                value: Some(item[at + 1..].to_vec()),
            },
            None => ConfigEntry {
                key: item.to_vec(),
                value: None,
            },
        });
    }
    Some(entries)
}

/// The parser against git itself, on generated and mutated configs: the same entries, or
/// both refusing. Where this parser accepts what git does not, or reads other keys, a
/// config could pass the allow-list and run something in the host's git.
#[test]
fn the_parser_reads_what_git_reads() {
    if !crate::policy::test_support::git_present("the differential test of the config parser") {
        return;
    }
    let dir = std::env::temp_dir().join(format!("sbx-gitconfig-fuzz-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // The seeds in interleaved shares, one thread each (a git process per seed: the time
    // goes to starting them, about 1.5 ms of CPU each).
    const SEEDS: u64 = 2000;
    const SHARES: u64 = 8;
    let share = |first: u64| {
        let file = dir.join(format!("config-{first}"));
        let mut checked = (0, 0);
        for seed in (first..=SEEDS).step_by(SHARES as usize) {
            let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
            let text = generated(&mut rng);
            std::fs::write(&file, &text).unwrap();
            let git = git_reads(&file);
            let ours = parse(&text).ok();
            // git lists a key outside any section, which no command reads; ours keeps it
            // too (and the allow-list refuses it).
            assert_eq!(
                ours,
                git,
                "seed {seed}: {:?}",
                String::from_utf8_lossy(&text)
            );
            if git.is_some() {
                checked.0 += 1;
            } else {
                checked.1 += 1;
            }
        }
        checked
    };
    let checked = std::thread::scope(|scope| {
        let shares: Vec<_> = (1..=SHARES)
            .map(|first| scope.spawn(move || share(first)))
            .collect();
        shares
            .into_iter()
            .map(|s| s.join().unwrap())
            .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1))
    });
    std::fs::remove_dir_all(&dir).unwrap();
    // Both kinds were exercised.
    assert!(checked.0 > 300 && checked.1 > 300, "{checked:?}");
}
