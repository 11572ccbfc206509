-- wrk: each connection waits 40 ms after every answer before its next
-- request (scripts/bench.sh's paced dashboard load during ingest).
function delay()
  return 40
end
