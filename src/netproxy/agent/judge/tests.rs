use super::*;
use crate::netproxy::agent::wire::{put_string, AgentRequest};

/// A key of fixed seed: its public blob and a way to sign with it.
fn key(seed: u8) -> ssh_key::PrivateKey {
    ssh_key::private::Ed25519Keypair::from_seed(&[seed; 32]).into()
}

fn blob(k: &ssh_key::PrivateKey) -> Vec<u8> {
    k.public_key().to_bytes().unwrap()
}

fn signed(k: &ssh_key::PrivateKey, data: &[u8]) -> Vec<u8> {
    let sig: ssh_key::Signature = signature::Signer::sign(k, data);
    Vec::try_from(sig).unwrap()
}

fn login(session: &[u8], key: &[u8], host_key: Option<&[u8]>) -> Vec<u8> {
    let mut d = Vec::new();
    put_string(&mut d, session);
    d.push(wire::code::USERAUTH_REQUEST);
    put_string(&mut d, b"git");
    put_string(&mut d, b"ssh-connection");
    put_string(
        &mut d,
        match host_key {
            Some(_) => b"publickey-hostbound-v00@openssh.com",
            None => b"publickey",
        },
    );
    d.push(1);
    put_string(&mut d, b"ssh-ed25519");
    put_string(&mut d, key);
    if let Some(h) = host_key {
        put_string(&mut d, h);
    }
    d
}

fn sshsig(namespace: &[u8]) -> Vec<u8> {
    let mut d = b"SSHSIG".to_vec();
    for s in [namespace, b"", b"sha512", b"HASH"] {
        put_string(&mut d, s);
    }
    d
}

struct World {
    user: ssh_key::PrivateKey,
    other_user: ssh_key::PrivateKey,
    host: ssh_key::PrivateKey,
    other_host: ssh_key::PrivateKey,
    rules: AgentRules,
}

fn world(hosts: bool, sign_commits: bool) -> World {
    let (user, other_user, host, other_host) = (key(1), key(2), key(3), key(4));
    let rules = AgentRules {
        keys: vec![Key {
            blob: blob(&user),
            fingerprint: fingerprint(&blob(&user)),
            hosts: if hosts {
                vec!["git.test".into()]
            } else {
                vec![]
            },
            host_keys: if hosts { vec![blob(&host)] } else { vec![] },
        }],
        sign_commits,
        confirm: false,
        known: vec![
            (blob(&host), vec!["git.test".into()]),
            (blob(&other_host), vec!["[other.test]:2222".into()]),
        ],
    };
    World {
        user,
        other_user,
        host,
        other_host,
        rules,
    }
}

fn bind<'a>(host: &'a [u8], session: &'a [u8], sig: &'a [u8], forwarding: bool) -> SessionBind<'a> {
    SessionBind {
        host_key: host,
        session_id: session,
        signature: sig,
        forwarding,
    }
}

fn refused(v: Verdict) -> Refusal {
    match v {
        Verdict::Refuse(r) => r,
        Verdict::Sign { what } => panic!("signed: {what}"),
    }
}

#[test]
fn only_named_keys_are_listed_or_used() {
    let w = world(true, false);
    let all = vec![
        (blob(&w.user), b"me".to_vec()),
        (blob(&w.other_user), b"other".to_vec()),
    ];
    assert_eq!(w.rules.listed(all), vec![(blob(&w.user), b"me".to_vec())]);
    let r = refused(w.rules.judge_sign(
        &Connection::default(),
        &blob(&w.other_user),
        &login(b"S", &blob(&w.other_user), None),
    ));
    assert_eq!(r.kind, Kind::Agent);
    assert_eq!(
        r.fix,
        Some(format!("--ssh-key {}", fingerprint(&blob(&w.other_user))))
    );
}

#[test]
fn a_login_is_signed_only_for_a_bound_session_of_an_allowed_host() {
    let w = world(true, false);
    let key = blob(&w.user);
    let mut conn = Connection::default();
    // Unbound: refused, the host being restricted.
    let r = refused(w.rules.judge_sign(&conn, &key, &login(b"S1", &key, None)));
    assert!(r.subject.contains("not bound"), "{r:?}");
    // Bound to the allowed host, with its real signature: signed.
    let sig = signed(&w.host, b"S1");
    w.rules
        .bind(&mut conn, &bind(&blob(&w.host), b"S1", &sig, false))
        .unwrap();
    let v = w.rules.judge_sign(&conn, &key, &login(b"S1", &key, None));
    assert!(
        matches!(&v, Verdict::Sign { what } if what.contains("git.test")),
        "{v:?}"
    );
    // Host-bound userauth naming another host key than the session's: refused.
    let r = refused(w.rules.judge_sign(
        &conn,
        &key,
        &login(b"S1", &key, Some(&blob(&w.other_host))),
    ));
    assert!(r.why.contains("another host key"));
    // A session id never bound: refused.
    refused(w.rules.judge_sign(&conn, &key, &login(b"S2", &key, None)));
    // Another host, really bound: refused, with the option naming it.
    let sig = signed(&w.other_host, b"S3");
    w.rules
        .bind(&mut conn, &bind(&blob(&w.other_host), b"S3", &sig, false))
        .unwrap();
    let r = refused(w.rules.judge_sign(&conn, &key, &login(b"S3", &key, None)));
    assert_eq!(
        r.subject,
        format!("{} for [other.test]:2222", fingerprint(&key))
    );
    assert_eq!(
        r.fix,
        Some(format!("--ssh-key {}@other.test:2222", fingerprint(&key)))
    );
}

#[test]
fn a_bind_the_host_did_not_sign_is_refused() {
    let w = world(true, false);
    let key = blob(&w.user);
    let mut conn = Connection::default();
    // The program claims the allowed host's key for a session of its own choosing,
    // signed by another key: refused, and the login stays unbound.
    let forged = signed(&w.other_host, b"S1");
    assert!(w
        .rules
        .bind(&mut conn, &bind(&blob(&w.host), b"S1", &forged, false))
        .is_err());
    assert!(w
        .rules
        .bind(&mut conn, &bind(&blob(&w.host), b"S1", b"junk", false))
        .is_err());
    refused(w.rules.judge_sign(&conn, &key, &login(b"S1", &key, None)));
}

#[test]
fn forwarding_refuses_every_signature_on_its_connection() {
    let w = world(false, true);
    let key = blob(&w.user);
    let mut conn = Connection::default();
    let sig = signed(&w.host, b"S1");
    w.rules
        .bind(&mut conn, &bind(&blob(&w.host), b"S1", &sig, true))
        .unwrap();
    let r = refused(w.rules.judge_sign(&conn, &key, &login(b"S1", &key, None)));
    assert!(r.subject.contains("forwarding"));
    refused(w.rules.judge_sign(&conn, &key, &sshsig(b"git")));
}

#[test]
fn no_hosts_named_means_any_host_but_a_bound_connection_stays_checked() {
    let w = world(false, false);
    let key = blob(&w.user);
    let conn = Connection::default();
    assert!(matches!(
        w.rules.judge_sign(&conn, &key, &login(b"S", &key, None)),
        Verdict::Sign { .. }
    ));
    // A login for another key than the one asked to sign: refused.
    let other = blob(&w.other_user);
    refused(w.rules.judge_sign(&conn, &key, &login(b"S", &other, None)));
}

#[test]
fn git_signatures_only_when_allowed_and_nothing_else() {
    let on = world(false, true);
    let key = blob(&on.user);
    let conn = Connection::default();
    assert!(matches!(
        on.rules.judge_sign(&conn, &key, &sshsig(b"git")),
        Verdict::Sign { .. }
    ));
    let r = refused(on.rules.judge_sign(&conn, &key, &sshsig(b"file")));
    assert!(r.subject.contains("namespace file"));
    refused(on.rules.judge_sign(&conn, &key, b"arbitrary challenge"));
    let off = world(false, false);
    let r = refused(off.rules.judge_sign(&conn, &key, &sshsig(b"git")));
    assert_eq!(r.fix.as_deref(), Some("--ssh-sign-commits"));
}

#[test]
fn changing_requests_are_named() {
    let names: Vec<String> = [17u8, 18, 19, 22, 23, 25, 99]
        .iter()
        .map(|&n| refused_request(&AgentRequest::Other(n)).subject)
        .collect();
    assert_eq!(
        names,
        [
            "add a key",
            "remove a key",
            "remove every key",
            "lock the agent",
            "unlock the agent",
            "add a key",
            "message 99"
        ]
    );
    let ext = refused_request(&AgentRequest::Extension {
        name: b"query",
        body: b"",
    });
    assert_eq!(ext.subject, "extension query");
    let _ = (&world(false, false).host, &world(false, false).other_host);
}
