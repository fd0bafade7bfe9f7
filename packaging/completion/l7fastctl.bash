# bash completion for l7fastctl(8)        -*- shell-script -*-
_l7fastctl()
{
    local cur prev words cword
    _init_completion || return

    local commands='status reload stats routes check'
    local cmd= i
    for ((i = 1; i < cword; i++)); do
        case ${words[i]} in
            status | reload | stats | routes | check)
                cmd=${words[i]}
                break
                ;;
        esac
    done

    if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W '--json --help' -- "$cur"))
        return
    fi
    case $cmd in
        '')
            COMPREPLY=($(compgen -W "$commands" -- "$cur"))
            ;;
        check)
            # one policy file after "check"
            [[ $prev == check ]] && _filedir toml
            ;;
    esac
} &&
    complete -F _l7fastctl l7fastctl
