#!/bin/sh
# greet.sh [NAME]: prints a greeting for NAME (default: world).
name="${1:-world}"
echo "Helo, $name!"
