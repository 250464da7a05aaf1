export LUA_PATH="$PWD/lua/?.lua;$PWD/lua/?/init.lua;;"
for round in 1 2; do
 for b in pre new; do
  if [ $b = pre ]; then export LUA_CPATH="$PWD/build/pre/?.so;;"; else export LUA_CPATH="$PWD/build/?.so;;"; fi
  echo "== $b round $round"; timeout 60 lua5.4 bench/async.lua --repeats 3 2>&1 | grep -E "^\| \(|one call"
 done
done
