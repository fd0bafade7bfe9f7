# bash completion for l7fastctl(8)                      -*- shell-script -*-
# Works with and without the bash-completion package (whose helpers give
# nicer file name completion when present).
_l7fastctl()
{
    local cur prev words cword
    if declare -F _init_completion >/dev/null; then
        _init_completion || return
    else
        cur=${COMP_WORDS[COMP_CWORD]}
        prev=${COMP_WORDS[COMP_CWORD - 1]}
        words=("${COMP_WORDS[@]}")
        cword=$COMP_CWORD
    fi

    local commands='status reload stats routes dump check explain log-level drain undrain'
    local cmd='' file='' i
    for ((i = 1; i < cword; i++)); do
        case ${words[i]} in
            --policy-dir | --policy | --source | --token | --listener | --header | -H) ((i++)) ;;
            -*) ;;
            *)
                if [[ -z $cmd ]]; then
                    cmd=${words[i]}
                else
                    file=${words[i]}
                fi
                ;;
        esac
    done

    if [[ $prev == --policy ]]; then
        if declare -F _filedir >/dev/null; then
            _filedir toml
        else
            COMPREPLY=($(compgen -f -X '!*.toml' -- "$cur") $(compgen -d -- "$cur"))
        fi
        return
    fi
    if [[ $cmd == explain && -z $file && $prev != -* ]] && [[ $cur != -* ]]; then
        COMPREPLY=($(compgen -W 'GET HEAD POST PUT DELETE PATCH OPTIONS' -- "$cur"))
        return
    fi
    if [[ $prev == --policy-dir ]]; then
        if declare -F _filedir >/dev/null; then
            _filedir -d
        else
            COMPREPLY=($(compgen -d -- "$cur"))
        fi
        return
    fi
    if [[ $cur == -* ]]; then
        local opts='--json --help --version'
        [[ $cmd == check ]] && opts+=' --policy-dir'
        [[ $cmd == explain ]] && opts+=' -H --source --token --listener --policy --policy-dir'
        COMPREPLY=($(compgen -W "$opts" -- "$cur"))
        return
    fi
    if [[ -z $cmd ]]; then
        COMPREPLY=($(compgen -W "$commands" -- "$cur"))
    elif [[ $cmd == log-level && -z $file ]]; then
        COMPREPLY=($(compgen -W 'error warning notice info debug reset' -- "$cur"))
    elif [[ $cmd == check && -z $file ]]; then
        if declare -F _filedir >/dev/null; then
            _filedir toml
        else
            COMPREPLY=($(compgen -f -X '!*.toml' -- "$cur") $(compgen -d -- "$cur"))
        fi
    fi
} &&
    complete -F _l7fastctl l7fastctl
