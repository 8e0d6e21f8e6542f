#!/bin/sh
# Runs in the sandbox before the agent starts.
echo "setup: $(sh ./greet.sh setup)"
