#!/bin/sh
# test.sh: the tests. Run it with `sh test.sh`.
fail=0
check() {
	got=$(sh ./greet.sh "$1")
	if [ "$got" = "$2" ]; then
		echo "ok   greet $1"
	else
		echo "FAIL greet $1: got '$got', want '$2'"
		fail=1
	fi
}
check Ada "Hello, Ada!"
check "" "Hello, world!"
exit $fail
