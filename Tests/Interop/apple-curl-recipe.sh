#!/usr/bin/env bash
# Apple's own command-line recipe ("Sending push notifications using command-line tools"): a provider
# token made with openssl (the signature is DER, as `openssl dgst -sign` writes it) and curl over HTTP/2.
# Usage: apple-curl-recipe.sh KEY_P8 KEY_ID TEAM_ID TOPIC DEVICE_TOKEN HOST:PORT CA_PEM
# Prints curl's `-w` line: the status, then the body.
set -euo pipefail
TOKEN_KEY_FILE_NAME=$1 AUTH_KEY_ID=$2 TEAM_ID=$3 TOPIC=$4 DEVICE_TOKEN=$5 APNS_HOST_NAME=$6 CA=$7
JWT_ISSUE_TIME=$(date +%s)
JWT_HEADER=$(printf '{ "alg": "ES256", "kid": "%s" }' "${AUTH_KEY_ID}" | openssl base64 -e -A | tr -- '+/' '-_' | tr -d =)
JWT_CLAIMS=$(printf '{ "iss": "%s", "iat": %d }' "${TEAM_ID}" "${JWT_ISSUE_TIME}" | openssl base64 -e -A | tr -- '+/' '-_' | tr -d =)
JWT_HEADER_CLAIMS="${JWT_HEADER}.${JWT_CLAIMS}"
JWT_SIGNED_HEADER_CLAIMS=$(printf "${JWT_HEADER_CLAIMS}" | openssl dgst -binary -sha256 -sign "${TOKEN_KEY_FILE_NAME}" | openssl base64 -e -A | tr -- '+/' '-_' | tr -d =)
AUTHENTICATION_TOKEN="${JWT_HEADER}.${JWT_CLAIMS}.${JWT_SIGNED_HEADER_CLAIMS}"
curl -s -o /dev/stderr -w '%{http_code}\n' --http2 --cacert "$CA" \
    --header "apns-topic: $TOPIC" --header "apns-push-type: widgets" \
    --header "authorization: bearer $AUTHENTICATION_TOKEN" \
    --data '{"aps":{"content-changed":true}}' \
    "https://${APNS_HOST_NAME}/3/device/${DEVICE_TOKEN}"
