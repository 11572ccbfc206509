-- wrk: requests rotate over the paths in the file named after `--`, one per
-- line (scripts/bench.sh's key pages: many keys, not one hot key).
local paths = {}
local next_path = 0

function init(args)
  for line in io.lines(args[1]) do
    if line ~= "" then paths[#paths + 1] = line end
  end
end

function request()
  next_path = next_path % #paths + 1
  return wrk.format("GET", paths[next_path])
end
