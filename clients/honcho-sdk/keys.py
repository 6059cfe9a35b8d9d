"""Keys across Honcho and roncho: a key minted the way Honcho's tooling mints
it (PyJWT, HS256 over the shared secret, Honcho's claims `t`, `ad`, `w`,
`p`, `s` and an ISO-8601 `exp`) works against roncho through the SDK, an
expired one is refused, and a key roncho mints verifies with PyJWT under the
same secret, so Honcho would take it. Prints one line per step and exits
non-zero at the first that fails.

    python keys.py --base-url URL --secret SECRET --roncho-key KEY --workspace ID
"""

import argparse
import datetime

import jwt
from honcho import Honcho
from steps import step, summary


def honcho_key(secret, **claims):
    """A key as Honcho's create_jwt writes it: its claims without the unset ones."""
    payload = {"t": datetime.datetime.now().isoformat(), **claims}
    return jwt.encode({k: v for k, v in payload.items() if v is not None}, secret, algorithm="HS256")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--secret", required=True)
    parser.add_argument("--roncho-key", required=True)
    parser.add_argument("--workspace", required=True)
    args = parser.parse_args()
    later = (datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=1)).isoformat()
    earlier = (datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(hours=1)).isoformat()

    def honcho_admin_key():
        honcho = Honcho(base_url=args.base_url, api_key=honcho_key(args.secret, ad=True), workspace_id="keys-admin")
        honcho.peer("alice", metadata={"from": "a Honcho key"})
        assert [peer.id for peer in honcho.peers()] == ["alice"]

    def honcho_workspace_key_with_expiry():
        key = honcho_key(args.secret, w="keys-admin", exp=later)
        honcho = Honcho(base_url=args.base_url, api_key=key, workspace_id="keys-admin")
        assert honcho.peer("alice").get_metadata() == {"from": "a Honcho key"}

    def honcho_key_for_another_workspace_is_refused():
        key = honcho_key(args.secret, w="someone-else")
        honcho = Honcho(base_url=args.base_url, api_key=key, workspace_id="keys-admin")
        refused(lambda: list(honcho.peers()))

    def expired_honcho_key_is_refused():
        honcho = Honcho(
            base_url=args.base_url, api_key=honcho_key(args.secret, ad=True, exp=earlier), workspace_id="keys-admin"
        )
        refused(lambda: list(honcho.peers()))

    def roncho_key_verifies_with_pyjwt():
        claims = jwt.decode(args.roncho_key, args.secret, algorithms=["HS256"])
        assert claims.get("w") == args.workspace, claims
        try:
            jwt.decode(args.roncho_key, args.secret + "-other", algorithms=["HS256"])
        except jwt.InvalidSignatureError:
            return
        raise AssertionError("a roncho key verified under another secret")

    step("a key minted as Honcho does (admin) works", honcho_admin_key)
    step("a Honcho workspace key with an ISO-8601 exp works", honcho_workspace_key_with_expiry)
    step("a Honcho key for another workspace is refused (401)", honcho_key_for_another_workspace_is_refused)
    step("an expired Honcho key is refused (401)", expired_honcho_key_is_refused)
    step("a key roncho mints verifies with PyJWT under the shared secret", roncho_key_verifies_with_pyjwt)
    summary("honcho-sdk keys")


def refused(call):
    try:
        call()
    except Exception as error:  # noqa: BLE001 - the SDK raises its own error types
        assert "401" in str(error) or "uthenticat" in str(error) or "ermission" in str(error), repr(error)
        return
    raise AssertionError("the call was not refused")


if __name__ == "__main__":
    main()
