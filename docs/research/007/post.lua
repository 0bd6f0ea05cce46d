-- wrk: POST /scores for a random player among 10000 with a random score, as pure-bench does.
math.randomseed(os.time())
request = function()
  local body = string.format('{"player":"player%d","score":%d}', math.random(0, 9999), math.random(0, 999999))
  return wrk.format("POST", "/scores", {["Content-Type"] = "application/json"}, body)
end
