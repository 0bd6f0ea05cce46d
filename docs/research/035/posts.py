"""Posts N scores to the scoreboard on 127.0.0.1:PORT, one at a time over one connection.

python3 posts.py PORT N
"""
import http.client
import json
import sys

port, n = int(sys.argv[1]), int(sys.argv[2])
conn = http.client.HTTPConnection("127.0.0.1", port)
for i in range(n):
    body = json.dumps({"player": f"p{i % 500}", "score": i})
    conn.request("POST", "/scores", body, {"content-type": "application/json"})
    answer = conn.getresponse()
    answer.read()
    if answer.status >= 300:
        sys.exit(f"post {i}: {answer.status}")
