#!/usr/bin/env bash
# One push as Apple's command-line recipe sends it ("Sending push notifications using command-line tools"):
# a provider token made with openssl (its signature DER, as `openssl dgst -sign` writes it) and curl over
# HTTP/2, with the headers the recipe names for the push type: `widgets` with no apns-priority and no
# apns-expiration ("Updating widgets with WidgetKit push notifications"); `controls` with apns-expiration 0
# and apns-priority 10 (Apple's recipe for controls).
# Usage: apple-curl-push.sh KEY_P8 KEY_ID TEAM_ID BUNDLE PUSH_TYPE DEVICE_TOKEN HOST:PORT CA_PEM
# Prints the status, a space, then the body.
set -euo pipefail
TOKEN_KEY_FILE_NAME=$1 AUTH_KEY_ID=$2 TEAM_ID=$3 BUNDLE=$4 PUSH_TYPE=$5 DEVICE_TOKEN=$6 APNS_HOST_NAME=$7 CA=$8
JWT_ISSUE_TIME=$(date +%s)
JWT_HEADER=$(printf '{ "alg": "ES256", "kid": "%s" }' "${AUTH_KEY_ID}" | openssl base64 -e -A | tr -- '+/' '-_' | tr -d =)
JWT_CLAIMS=$(printf '{ "iss": "%s", "iat": %d }' "${TEAM_ID}" "${JWT_ISSUE_TIME}" | openssl base64 -e -A | tr -- '+/' '-_' | tr -d =)
JWT_HEADER_CLAIMS="${JWT_HEADER}.${JWT_CLAIMS}"
JWT_SIGNED_HEADER_CLAIMS=$(printf "${JWT_HEADER_CLAIMS}" | openssl dgst -binary -sha256 -sign "${TOKEN_KEY_FILE_NAME}" | openssl base64 -e -A | tr -- '+/' '-_' | tr -d =)
AUTHENTICATION_TOKEN="${JWT_HEADER}.${JWT_CLAIMS}.${JWT_SIGNED_HEADER_CLAIMS}"
extra=()
if [ "$PUSH_TYPE" = controls ]; then
    extra=(--header "apns-expiration: 0" --header "apns-priority: 10")
fi
body=$(mktemp)
status=$(curl -s -o "$body" -w '%{http_code}' --http2 --cacert "$CA" \
    --header "apns-topic: ${BUNDLE}.push-type.${PUSH_TYPE}" --header "apns-push-type: ${PUSH_TYPE}" "${extra[@]}" \
    --header "authorization: bearer $AUTHENTICATION_TOKEN" \
    --data '{"aps":{"content-changed":true}}' \
    "https://${APNS_HOST_NAME}/3/device/${DEVICE_TOKEN}")
printf '%s %s\n' "$status" "$(cat "$body")"
rm -f "$body"
