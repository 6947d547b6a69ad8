"""Signs with the official SDKs, as oracles for velero-wasm's signing component.

Reads {"s3": [case, ...], "azure": [case, ...], "names": [s3 case, ...]} as JSON on stdin and
writes {"s3": [url, ...], "azure": [sas_token, ...], "names": [url or "refused: <error>", ...]} on
stdout. S3 URLs come from botocore's generate_presigned_url, Azure SAS tokens from
azure-storage-blob's generate_blob_sas, each with the clock fixed to the case's `now`.

S3 addressing: without an endpoint or forced path style, botocore is told "virtual" and so follows the
SDKs' endpoint rules (a bucket that is not a lower-case DNS label goes path style), on the regional
host in us-east-1 too, as the AWS SDK for Go v2 does ("auto" would presign on the legacy global host).
Exits 3 when a module is missing (the caller decides whether that is fatal).
"""

import datetime
import json
import os
import sys

try:
    import botocore.auth
    import botocore.session
    from botocore.config import Config
    from azure.storage.blob import UserDelegationKey, generate_blob_sas
except ImportError as missing:
    print(f"missing Python module: {missing.name}", file=sys.stderr)
    sys.exit(3)

for var in list(os.environ):
    if var.startswith("AWS_"):
        del os.environ[var]
os.environ["AWS_CONFIG_FILE"] = os.devnull
os.environ["AWS_SHARED_CREDENTIALS_FILE"] = os.devnull


def utc(seconds):
    return datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc).replace(tzinfo=None)


# One session for every case: it keeps the loaded service model and endpoint rules between clients.
SESSION = botocore.session.get_session()


def presign(case):
    fixed = utc(case["now"])
    botocore.auth.get_current_datetime = lambda *args, **kwargs: fixed
    path_style = case["path_style"] or case.get("endpoint")
    client = SESSION.create_client(
        "s3",
        region_name=case["region"],
        aws_access_key_id=case["access_key_id"],
        aws_secret_access_key=case["secret_access_key"],
        aws_session_token=case.get("session_token"),
        endpoint_url=case.get("endpoint"),
        config=Config(
            signature_version="s3v4",
            s3={"addressing_style": "path" if path_style else "virtual", "us_east_1_regional_endpoint": "regional"},
        ),
    )
    return client.generate_presigned_url(
        "get_object", Params={"Bucket": case["bucket"], "Key": case["key"]}, ExpiresIn=case["expires"]
    )


def sas(case):
    start = utc(case["now"])
    expiry = utc(case["now"] + case["expires"])
    common = dict(
        account_name=case["account"],
        container_name=case["container"],
        blob_name=case["blob"],
        permission=case["permissions"],
        start=start,
        expiry=expiry,
        protocol="https",
    )
    key = case.get("delegation_key")
    if key is None:
        return generate_blob_sas(account_key=case["account_key"], **common)
    delegation = UserDelegationKey()
    delegation.signed_oid = key["signed_oid"]
    delegation.signed_tid = key["signed_tid"]
    delegation.signed_start = key["signed_start"]
    delegation.signed_expiry = key["signed_expiry"]
    delegation.signed_service = key["signed_service"]
    delegation.signed_version = key["signed_version"]
    delegation.value = key["value"]
    return generate_blob_sas(user_delegation_key=delegation, **common)


def name_check(case):
    """The URL botocore presigns for a bucket and region, or the name of the error it refuses them with
    (its own checks of the names: validate_bucket_name, validate_region_name)."""
    try:
        return presign(case)
    except Exception as refused:
        return f"refused: {type(refused).__name__}"


cases = json.load(sys.stdin)
json.dump(
    {
        "s3": [presign(c) for c in cases.get("s3", [])],
        "azure": [sas(c) for c in cases.get("azure", [])],
        "names": [name_check(c) for c in cases.get("names", [])],
    },
    sys.stdout,
)
